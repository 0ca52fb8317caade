"""``agent_memory.adk.AgentMemoryService`` as Google ADK uses a memory service, on every
provider: ingestion of sessions (again and again, without duplicates), event deltas and
explicit memories, search of one user's memories, deletion and erasure; and ADK's own
``Runner`` context, ``load_memory`` and ``preload_memory`` calling it, with no model."""

import unittest
import uuid

from google.adk.agents import LlmAgent
from google.adk.agents.context import Context
from google.adk.events.event import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models.llm_request import LlmRequest
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.load_memory_tool import load_memory
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types

from agent_memory import MemoryScope
from agent_memory.adk import AgentMemoryService

from framework_providers import stamp
from support import QuietSlowCallbacks


def event(author, text, timestamp, role=None):
    content = types.Content(role=role or ("user" if author == "user" else "model"), parts=[types.Part(text=text)])
    return Event(id=uuid.uuid4().hex[:8], invocation_id="inv-1", author=author, content=content, timestamp=timestamp)


class Cases(QuietSlowCallbacks):
    async def asyncSetUp(self):
        await super().asyncSetUp()
        self.store = self.make_store()
        self.app = self.application_id()
        self.memory = AgentMemoryService(self.store)
        self.sessions = InMemorySessionService()

    async def asyncTearDown(self):
        await self.memory.close()
        await super().asyncTearDown()

    async def session(self, user, texts):
        session = await self.sessions.create_session(app_name=self.app, user_id=user)
        for n, (author, text) in enumerate(texts):
            await self.sessions.append_event(session, event(author, text, 1_700_000_000 + n))
        # A function call without text is not a memory.
        call = types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(name="f", args={}))])
        await self.sessions.append_event(session, Event(id="call", invocation_id="inv-1", author="agent", content=call))
        return await self.sessions.get_session(app_name=self.app, user_id=user, session_id=session.id)

    async def records(self, user):
        page = await self.store.list(MemoryScope(self.app, user, "adk"), 100)
        return {record.key: record for record in page.items}

    async def test_ingestion_is_idempotent(self):
        session = await self.session("u1", [("user", "My favourite colour is green."), ("agent", "Noted: green.")])
        await self.memory.add_session_to_memory(session)
        first = await self.records("u1")
        self.assertEqual(len(first), 2)
        self.assertEqual(sorted(r.content for r in first.values()), ["My favourite colour is green.", "Noted: green."])
        self.assertTrue(all(key.startswith(f"{session.id}/") for key in first))
        # ADK adds a session again as it grows: nothing changes, nothing doubles.
        await self.sessions.append_event(session, event("user", "And I live in Lyon.", 1_700_000_100))
        session = await self.sessions.get_session(app_name=self.app, user_id="u1", session_id=session.id)
        await self.memory.add_session_to_memory(session)
        await self.memory.add_session_to_memory(session)
        second = await self.records("u1")
        self.assertEqual(len(second), 3)
        for key, record in first.items():
            self.assertEqual(second[key].revision, record.revision)
        # A delta of events, twice.
        delta = [event("user", "Prefers tea over coffee.", 1_700_000_200)]
        for _ in range(2):
            await self.memory.add_events_to_memory(app_name=self.app, user_id="u1", events=delta, session_id=session.id)
        self.assertEqual(len(await self.records("u1")), 4)

    async def test_search_is_per_user_and_returns_entries(self):
        await self.memory.add_session_to_memory(await self.session("u1", [("user", "My favourite colour is green."), ("agent", "I will remember your favourite colour.")]))
        await self.memory.add_session_to_memory(await self.session("u2", [("user", "My favourite colour is red.")]))
        found = (await self.memory.search_memory(app_name=self.app, user_id="u1", query="favourite colour")).memories
        self.assertEqual([m.author for m in found], ["user", "agent"])  # oldest first
        self.assertEqual(found[0].content.parts[0].text, "My favourite colour is green.")
        self.assertEqual(found[0].content.role, "user")
        self.assertTrue(found[0].timestamp.startswith("2023-11-14T22:13:20"))
        self.assertEqual((await self.memory.search_memory(app_name=self.app, user_id="u2", query="green")).memories, [])
        self.assertEqual(len((await self.memory.search_memory(app_name=self.app, user_id="u2", query="red")).memories), 1)
        self.assertEqual((await self.memory.search_memory(app_name=self.app, user_id="u1", query="  ")).memories, [])
        # At most `limit` entries: among those sharing as many words, the newest.
        limited = AgentMemoryService(self.store, limit=1)
        newest = (await limited.search_memory(app_name=self.app, user_id="u1", query="colour")).memories
        self.assertEqual([m.author for m in newest], ["agent"])

    async def test_search_matches_any_word_ignoring_case_best_first(self):
        await self.memory.add_session_to_memory(await self.session("u1", [
            ("user", "My dog is called Biscuit."),
            ("agent", "Biscuit is a lovely name."),
            ("user", "I live in BERLIN."),
            ("user", "Prefers the Berlin warehouse for deliveries."),
            ("user", "Stra\u00dfe names are long."),
        ]))
        search = lambda query, limit=10: AgentMemoryService(self.store, limit=limit).search_memory(app_name=self.app, user_id="u1", query=query)  # noqa: E731
        texts = lambda found: [m.content.parts[0].text for m in found.memories]  # noqa: E731
        # Any word, ignoring case, punctuation left out; the found entries in time order.
        self.assertEqual(texts(await search("What's the dog's name?")), [
            "My dog is called Biscuit.", "Biscuit is a lovely name.", "Prefers the Berlin warehouse for deliveries."])
        self.assertEqual(texts(await search("berlin")), ["I live in BERLIN.", "Prefers the Berlin warehouse for deliveries."])
        # The entries sharing the most words come first, whatever their age.
        self.assertEqual(texts(await search("which WAREHOUSE in berlin", limit=1)), ["Prefers the Berlin warehouse for deliveries."])
        self.assertEqual(texts(await search("dog biscuit", limit=1)), ["My dog is called Biscuit."])
        # An ASCII word is a whole word ("name" is not in "names"), inside another script too.
        self.assertEqual(texts(await search("names")), ["Stra\u00dfe names are long."])
        await self.memory.add_session_to_memory(await self.session("u1", [("user", "\u79c1\u306fPython\u3092\u4f7f\u3046")]))
        self.assertEqual(texts(await search("python")), ["\u79c1\u306fPython\u3092\u4f7f\u3046"])
        self.assertEqual(texts(await search("\u4f7f\u3046")), ["\u79c1\u306fPython\u3092\u4f7f\u3046"])
        self.assertEqual(texts(await search("thon")), [])
        # Simple case folding: \u00df is not "ss".
        self.assertEqual(texts(await search("STRASSE")), [])
        self.assertEqual(texts(await search("STRA\u1e9eE")), ["Stra\u00dfe names are long."])
        self.assertEqual(texts(await search("?! ...")), [])
        # A query of more words than one core search takes, and one longer than one takes.
        many = " ".join(f"filler{i}" for i in range(40)) + " Biscuit"
        self.assertEqual(texts(await search(many)), ["My dog is called Biscuit.", "Biscuit is a lovely name."])
        self.assertEqual(texts(await search("x" * 3000 + " dog")), ["My dog is called Biscuit."])

    async def test_explicit_memories_delete_and_erase(self):
        entry = MemoryEntry(id="pref-1", author="user", content=types.Content(role="user", parts=[types.Part(text="Vegetarian.")]), custom_metadata={"source": "form"})
        await self.memory.add_memory(app_name=self.app, user_id="u1", memories=[entry], custom_metadata={"batch": 1})
        await self.memory.add_memory(app_name=self.app, user_id="u1", memories=[entry])
        found = (await self.memory.search_memory(app_name=self.app, user_id="u1", query="Vegetarian")).memories
        self.assertEqual(len(found), 1)
        self.assertEqual(found[0].id, "memory/pref-1")
        self.assertEqual(found[0].custom_metadata, {"source": "form"})
        await self.memory.add_session_to_memory(await self.session("u1", [("user", "Vegetarian since 2010.")]))
        await self.memory.delete_memory(app_name=self.app, user_id="u1", memory_id=found[0].id)
        self.assertEqual(len((await self.memory.search_memory(app_name=self.app, user_id="u1", query="Vegetarian")).memories), 1)
        await self.memory.add_session_to_memory(await self.session("u2", [("user", "Vegetarian too.")]))
        self.assertEqual(await self.memory.erase(self.app, "u1"), 1)
        self.assertEqual((await self.memory.search_memory(app_name=self.app, user_id="u1", query="Vegetarian")).memories, [])
        self.assertEqual(len((await self.memory.search_memory(app_name=self.app, user_id="u2", query="Vegetarian")).memories), 1)

    async def test_runner_context_load_and_preload_memory(self):
        agent = LlmAgent(name="assistant", model="gemini-2.0-flash", tools=[load_memory, PreloadMemoryTool()])
        runner = Runner(agent=agent, app_name=self.app, session_service=self.sessions, memory_service=self.memory)
        earlier = await self.session("u1", [("user", "My dog is called Biscuit."), ("assistant", "Biscuit is a lovely name.")])
        now = await self.session("u1", [])
        # What an after-agent callback does to save a finished session.
        saving = Context(runner._new_invocation_context(earlier))
        await saving.add_session_to_memory()
        message = types.Content(role="user", parts=[types.Part(text="Biscuit")])
        context = Context(runner._new_invocation_context(now, new_message=message))
        # The load_memory tool, as the model would call it: any word ("is" too), the entry
        # sharing the most words first.
        loaded = await load_memory("dog is called", context)
        self.assertEqual(
            [m.content.parts[0].text for m in loaded.memories],
            ["My dog is called Biscuit.", "Biscuit is a lovely name."],
        )
        loaded = await load_memory("dog called", context)
        self.assertEqual([m.content.parts[0].text for m in loaded.memories], ["My dog is called Biscuit."])
        # preload_memory searches with the user's message and puts what it finds in the request.
        request = LlmRequest()
        await PreloadMemoryTool().process_llm_request(tool_context=context, llm_request=request)
        self.assertIn("user: My dog is called Biscuit.", str(request.contents))
        self.assertIn("assistant: Biscuit is a lovely name.", str(request.contents))
        # Another user's context sees nothing of it.
        stranger = await self.sessions.create_session(app_name=self.app, user_id="u2")
        other = Context(runner._new_invocation_context(stranger, new_message=message))
        self.assertEqual((await load_memory("Biscuit", other)).memories, [])


stamp(globals(), Cases, "AdkMemoryService")
del Cases

if __name__ == "__main__":
    unittest.main()
