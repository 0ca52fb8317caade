"""``agent_memory.langgraph.AgentMemoryStore`` as LangGraph's stores are used, on every
provider: the ops of a batch and their order, the namespace mapping and LangGraph's label
rules, filters, ``list_namespaces``, paging, TTL, compare-and-set, isolation and erasure; then
LangMem's memory tools and deepagents' store-backed files inside compiled graphs, with no
model (the tools and the backend are called as the graph's model would have them called)."""

import asyncio
import threading
import unittest
from typing import TypedDict

from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    PutOp,
    SearchOp,
)

from agent_memory import MAX_CONTENT_BYTES, MemoryConflictError, MemoryScope, MemoryValidationError
from agent_memory.langgraph import AgentMemoryStore, ScanLimitError

from framework_providers import stamp
from support import QuietSlowCallbacks


def one_node_graph(state, name, node, store):
    """A compiled graph of ``state`` that runs ``node`` (named ``name``) once, over ``store``."""
    builder = StateGraph(state)
    builder.add_node(name, node)
    builder.add_edge(START, name)
    builder.add_edge(name, END)
    return builder.compile(store=store)


class Cases(QuietSlowCallbacks):
    """Every case builds adapters over one fresh store of the provider, in an application of
    its own."""

    async def asyncSetUp(self):
        await super().asyncSetUp()
        self.store = self.make_store()
        self.app = self.application_id()
        self.adapters = []
        self.lg = self.adapter()

    async def asyncTearDown(self):
        for adapter in self.adapters:
            await adapter.aclose()
            adapter.close()
        await super().asyncTearDown()

    def adapter(self, **options):
        options.setdefault("application_id", self.app)
        options.setdefault("user_at", 1)
        if self.clock is not None:
            options.setdefault("clock", self.clock.now)
        adapter = AgentMemoryStore(self.store, **options)
        self.adapters.append(adapter)
        return adapter

    # --- batches and namespaces ---------------------------------------------------------------

    async def test_batch_results_follow_the_ops(self):
        results = await self.lg.abatch(
            [
                PutOp(("notes", "u1"), "b", {"text": "second"}),
                PutOp(("notes", "u1"), "a", {"text": "first"}),
                GetOp(("notes", "u1"), "a"),
                GetOp(("notes", "u1"), "missing"),
                SearchOp(("notes", "u1"), None, 10, 0, None),
                ListNamespacesOp(None, None, 10, 0),
                PutOp(("notes", "u1"), "a", None),
                GetOp(("notes", "u1"), "a"),
            ]
        )
        self.assertEqual(len(results), 8)
        self.assertIsNone(results[0])
        self.assertEqual(results[2].value, {"text": "first"})
        self.assertEqual(results[2].namespace, ("notes", "u1"))
        self.assertIsNone(results[3])
        self.assertEqual([item.key for item in results[4]], ["a", "b"])
        self.assertEqual(results[5], [("notes", "u1")])
        self.assertIsNone(results[7])

    async def test_namespaces_map_to_scopes_and_back(self):
        await self.lg.aput(("memories", "u1", "profile"), "k", {"v": 1})
        await self.lg.aput(("memories", "u1"), "k", {"v": 2})
        record = await self.store.get(MemoryScope(self.app, "u1", "memories.profile"), "k")
        self.assertEqual(record.content, '{"v":1}')
        self.assertIsNotNone(await self.store.get(MemoryScope(self.app, "u1", "memories"), "k"))
        # user_at=0 with nothing else: the default namespace.
        first = self.adapter(user_at=0)
        await first.aput(("u9",), "k", {"v": 3})
        self.assertIsNotNone(await self.store.get(MemoryScope(self.app, "u9"), "k"))
        self.assertEqual(await first.alist_namespaces(prefix=("u9",)), [("u9",)])

    async def test_label_rules_and_limits_refuse_before_io(self):
        for namespace in [
            ("memories",),  # too short to hold the user at position 1
            ("a.b", "u1"),
            ("", "u1"),
            ("langgraph", "u1"),
            ("x" * 200, "u1"),  # our namespace limit: 128 bytes
            ("memories", "u" * 200),  # our user id limit
        ]:
            with self.subTest(namespace=namespace), self.assertRaises(InvalidNamespaceError):
                await self.lg.aput(namespace, "k", {"v": 1})
        with self.assertRaises(InvalidNamespaceError):
            await self.lg.aget(("memories",), "k")
        await self.store.start()
        self.assertEqual((await self.store.list_users(self.app)).items, ())

    async def test_a_namespace_never_matches_a_text_neighbour(self):
        await self.lg.aput(("a", "u1", "b"), "k", {"v": "b"})
        await self.lg.aput(("a", "u1", "bc"), "k", {"v": "bc"})
        found = await self.lg.asearch(("a", "u1", "b"))
        self.assertEqual([item.namespace for item in found], [("a", "u1", "b")])
        self.assertEqual(
            await self.lg.alist_namespaces(prefix=("a", "u1", "b")), [("a", "u1", "b")]
        )

    # --- values --------------------------------------------------------------------------------

    async def test_values_times_and_size(self):
        value = {"text": "Likes \"green\" tea", "nested": {"list": [1, 2.5, None, True]}}
        await self.lg.aput(("notes", "u1"), "k", value)
        first = await self.lg.aget(("notes", "u1"), "k")
        self.assertEqual(first.value, value)
        self.assertIsNotNone(first.created_at.tzinfo)
        await self.advance(1.1)
        await self.lg.aput(("notes", "u1"), "k", {"text": "changed"}, index=["text"])
        second = await self.lg.aget(("notes", "u1"), "k")
        self.assertEqual(second.created_at, first.created_at)
        self.assertGreater(second.updated_at, first.updated_at)
        self.assertNotEqual(second.revision, first.revision)
        with self.assertRaises(MemoryValidationError) as raised:
            await self.lg.aput(("notes", "u1"), "big", {"text": "x" * MAX_CONTENT_BYTES})
        self.assertIn("at most 65536 bytes", str(raised.exception))
        with self.assertRaises(ValueError) as refused:
            AgentMemoryStore(self.store, application_id=self.app, user_at=1, index={"dims": 3})
        self.assertIn("no embeddings", str(refused.exception))

    async def test_query_matches_every_word_ignoring_case_over_string_fields(self):
        await self.lg.aput(("notes", "u1"), "tea", {"content": "Likes \"green\" tea", "n": 1})
        await self.lg.aput(("notes", "u1"), "deep", {"tags": [{"name": "green tea"}]})
        await self.lg.aput(("notes", "u1"), "coffee", {"content": "Drinks coffee"})
        await self.lg.aput(("notes", "u1"), "split", {"city": "Berlin", "site": "Warehouse"})
        await self.lg.aput(("notes", "u1"), "street", {"content": "Stra\u00dfe"})
        keys = lambda items: [item.key for item in items]  # noqa: E731
        search = lambda query: self.lg.asearch(("notes",), query=query)  # noqa: E731
        self.assertEqual(keys(await search("tea")), ["deep", "tea"])
        self.assertEqual(keys(await search("Tea")), ["deep", "tea"])
        self.assertEqual(keys(await search("TEA green")), ["deep", "tea"])
        self.assertEqual(keys(await search('"green"')), ["tea"])
        self.assertEqual(keys(await search("green coffee")), [])
        # Words may sit in different fields, never in a field's name.
        self.assertEqual(keys(await search("warehouse berlin")), ["split"])
        self.assertEqual(keys(await search("content")), [])
        self.assertEqual(keys(await search("city Berlin")), [])
        # Simple case folding: \u00df is not "ss".
        self.assertEqual(keys(await search("STRASSE")), [])
        self.assertEqual(keys(await search("stra\u00dfe")), ["street"])
        # Only white space restricts nothing, like no query.
        self.assertEqual(len(await search(" \t ")), 5)
        found = await self.lg.asearch(("notes", "u1"), query="coffee")
        self.assertIsNone(found[0].score)

    async def test_a_long_query_matches_every_word(self):
        words = [f"word{i}" for i in range(24)]
        await self.lg.aput(("notes", "u1"), "all", {"text": " ".join(words)})
        await self.lg.aput(("notes", "u1"), "most", {"text": " ".join(words[:-1])})
        keys = lambda items: [item.key for item in items]  # noqa: E731
        self.assertEqual(keys(await self.lg.asearch(("notes",), query=" ".join(reversed(words)))), ["all"])
        self.assertEqual(keys(await self.lg.asearch(("notes",), query=" ".join(words[:20]).upper())), ["all", "most"])
        # Longer than one core query: the datastore narrows by what fits, the adapter checks all.
        long_word = "\u00e9" * 700
        await self.lg.aput(("notes", "u1"), "long", {"text": f"{long_word} tail"})
        self.assertEqual(keys(await self.lg.asearch(("notes",), query=f"{long_word.upper()} TAIL")), ["long"])
        self.assertEqual(keys(await self.lg.asearch(("notes",), query=f"{long_word} head")), [])

    async def test_filters_compare_numbers_as_numbers(self):
        for key, n in [("a", 9), ("b", 10), ("c", "10"), ("d", 100), ("e", 2.5)]:
            await self.lg.aput(("items", "u1"), key, {"n": n, "kind": "x" if key < "c" else "y"})
        keys = lambda **f: [i.key for i in self.lg.search(("items", "u1"), filter=f)]  # noqa: E731
        self.assertEqual(await asyncio.to_thread(keys, n={"$gt": 9}), ["b", "d"])
        self.assertEqual(await asyncio.to_thread(keys, n={"$gte": 9, "$lt": 100}), ["a", "b"])
        self.assertEqual(await asyncio.to_thread(keys, n={"$lte": 9}), ["a", "e"])
        self.assertEqual(await asyncio.to_thread(keys, n=10), ["b"])
        self.assertEqual(await asyncio.to_thread(keys, n="10"), ["c"])
        self.assertEqual(await asyncio.to_thread(keys, n={"$eq": 10.0}), ["b"])
        self.assertEqual(await asyncio.to_thread(keys, n={"$ne": 10}), ["a", "c", "d", "e"])
        self.assertEqual(await asyncio.to_thread(keys, n={"$gt": "1"}), ["c"])
        self.assertEqual(await asyncio.to_thread(keys, kind="y", n={"$gt": 5}), ["d"])

    async def test_filters_on_text_are_narrowed_in_the_datastore(self):
        for n in range(30):
            await self.lg.aput(("items", "u1"), f"k{n:02}", {"kind": "note" if n % 10 else "pin", "n": n, "on": n == 20, "x": None if n == 7 else "v"})
        await self.lg.aput(("items", "u1"), "nested", {"inner": {"kind": "pin"}, "text": '"kind":"pin"'})
        # Five reads allowed (the namespace, then records): only a datastore that narrows by the
        # filter's text answers. "nested" holds the text too and is checked out.
        narrow = self.adapter(max_scan=5)
        keys = lambda items: [item.key for item in items]  # noqa: E731
        self.assertEqual(keys(await narrow.asearch(("items",), filter={"kind": "pin"})), ["k00", "k10", "k20"])
        self.assertEqual(keys(await narrow.asearch(("items",), filter={"kind": {"$eq": "pin"}, "n": {"$gt": 5}})), ["k10", "k20"])
        self.assertEqual(keys(await narrow.asearch(("items",), filter={"on": True})), ["k20"])
        self.assertEqual(keys(await narrow.asearch(("items",), filter={"x": None})), ["k07"])
        self.assertEqual(keys(await narrow.asearch(("items",), filter={"kind": "pin", "on": True}, query="V")), ["k20"])
        # A number has more than one spelling: no narrowing, so the bound applies.
        with self.assertRaises(ScanLimitError):
            await narrow.asearch(("items",), filter={"n": 3})
        self.assertEqual(keys(await self.lg.asearch(("items",), filter={"n": 3.0})), ["k03"])

    # --- listing and paging ---------------------------------------------------------------------

    async def test_list_namespaces_prefix_suffix_wildcards_depth_paging(self):
        for namespace in [
            ("a", "u1", "b", "c"),
            ("a", "u1", "b", "d", "e"),
            ("a", "u1", "b", "f"),
            ("a", "u2", "c", "f"),
            ("z", "u0"),
        ]:
            await self.lg.aput(namespace, "k", {"v": 1})
        ls = self.lg.alist_namespaces
        # Users in byte order, then tuples by their labels.
        self.assertEqual(
            await ls(),
            [("z", "u0"), ("a", "u1", "b", "c"), ("a", "u1", "b", "d", "e"), ("a", "u1", "b", "f"), ("a", "u2", "c", "f")],
        )
        self.assertEqual(
            await ls(prefix=("a", "u1", "b"), max_depth=4),
            [("a", "u1", "b", "c"), ("a", "u1", "b", "d"), ("a", "u1", "b", "f")],
        )
        self.assertEqual(await ls(suffix=("f",)), [("a", "u1", "b", "f"), ("a", "u2", "c", "f")])
        self.assertEqual(await ls(prefix=("a", "*", "c")), [("a", "u2", "c", "f")])
        self.assertEqual(await ls(suffix=("*", "f")), [("a", "u1", "b", "f"), ("a", "u2", "c", "f")])
        self.assertEqual(await ls(prefix=("a",), max_depth=1), [("a",)])
        self.assertEqual(await ls(max_depth=2), [("z", "u0"), ("a", "u1"), ("a", "u2")])
        paged = [await ls(limit=2, offset=offset) for offset in (0, 2, 4)]
        self.assertEqual(sum(paged, []), await ls())
        self.assertEqual(len(paged[2]), 1)

    async def test_search_pages_with_offset_in_order(self):
        for user in ("u2", "u1"):
            for namespace in (("docs", user, "b"), ("docs", user, "a")):
                for n in range(13):
                    await self.lg.aput(namespace, f"k{n:02d}", {"n": n})
        everything = await self.lg.asearch(("docs",), limit=100)
        self.assertEqual(len(everything), 52)
        order = [(item.namespace[1], item.namespace, item.key) for item in everything]
        self.assertEqual(order, sorted(order))
        pages = []
        offset = 0
        while True:
            page = await self.lg.asearch(("docs",), limit=10, offset=offset)
            if not page:
                break
            pages.extend(page)
            offset += 10
        self.assertEqual([(i.namespace, i.key) for i in pages], [(i.namespace, i.key) for i in everything])
        filtered = await self.lg.asearch(("docs", "u1"), filter={"n": {"$gte": 10}}, limit=4, offset=2)
        self.assertEqual([(i.namespace[2], i.key) for i in filtered], [("a", "k12"), ("b", "k10"), ("b", "k11"), ("b", "k12")])

    async def test_max_scan_refuses_instead_of_a_short_answer(self):
        small = self.adapter(max_scan=15)
        for n in range(20):
            await small.aput(("docs", "u1"), f"k{n:02d}", {"n": n})
        self.assertEqual(len(await small.asearch(("docs", "u1"), limit=10)), 10)
        with self.assertRaises(ScanLimitError) as raised:
            await small.asearch(("docs", "u1"), limit=10, offset=8)
        self.assertIn("max_scan=15", str(raised.exception))
        with self.assertRaises(ScanLimitError):
            await small.asearch(("docs", "u1"), filter={"n": {"$gt": 100}})

    async def test_cost_never_grows_with_other_users_data(self):
        small = self.adapter(max_scan=5)
        for n in range(20):
            await small.aput(("docs", "u2", f"ns{n:02d}"), f"k{n:02d}", {"n": n})
        await small.aput(("docs", "u1"), "mine", {"n": 1})
        self.assertEqual([i.key for i in await small.asearch(("docs", "u1"), filter={"n": 1})], ["mine"])
        self.assertEqual(await small.alist_namespaces(prefix=("docs", "u1")), [("docs", "u1")])
        self.assertEqual([i.key for i in await small.for_user("u1").asearch(("docs",))], ["mine"])
        with self.assertRaises(ScanLimitError):
            await small.alist_namespaces(prefix=("docs", "u2"))

    # --- TTL, revisions ----------------------------------------------------------------------

    async def test_ttl_expires_at_once_and_reads_refresh(self):
        seconds = 60 if self.clock is not None else 2
        lg = self.adapter(ttl={"default_ttl": seconds / 60, "refresh_on_read": True})
        self.assertTrue(lg.supports_ttl)
        await lg.aput(("t", "u1"), "refreshed", {"v": 1})
        await lg.aput(("t", "u1"), "plain", {"v": 2})
        await lg.aput(("t", "u1"), "forever", {"v": 3}, ttl=None)
        await self.advance(seconds * 0.6)
        self.assertIsNotNone(await lg.aget(("t", "u1"), "refreshed"))  # moves its expiry
        self.assertIsNotNone(await lg.aget(("t", "u1"), "plain", refresh_ttl=False))
        await self.advance(seconds * 0.6)
        self.assertIsNotNone(await lg.aget(("t", "u1"), "refreshed", refresh_ttl=False))
        self.assertIsNone(await lg.aget(("t", "u1"), "plain"))
        self.assertEqual([i.key for i in await lg.asearch(("t", "u1"), refresh_ttl=False)], ["forever", "refreshed"])
        await self.advance(seconds * 0.6)
        self.assertEqual([i.key for i in await lg.asearch(("t", "u1"))], ["forever"])
        self.assertGreaterEqual(await lg.asweep_ttl(), 2)
        self.assertEqual(await asyncio.to_thread(lg.sweep_ttl), 0)

    async def test_refresh_never_overwrites_a_concurrent_update(self):
        lg = self.adapter(ttl=10)
        await lg.aput(("t", "u1"), "k", {"v": 1})
        read = await self.store.get(MemoryScope(self.app, "u1", "t"), "k")
        await lg.aput(("t", "u1"), "k", {"v": 2})
        # The refresh of what was read loses against the newer write.
        refreshed = await lg._refreshed(read)
        self.assertEqual(refreshed.revision, read.revision)
        self.assertEqual((await lg.aget(("t", "u1"), "k")).value, {"v": 2})

    async def test_compare_and_set(self):
        await self.lg.aput(("cas", "u1"), "k", {"v": 1}, create_only=True)
        with self.assertRaises(MemoryConflictError):
            await self.lg.aput(("cas", "u1"), "k", {"v": 9}, create_only=True)
        item = await self.lg.aget(("cas", "u1"), "k")
        await self.lg.aput(("cas", "u1"), "k", {"v": 2}, expected_revision=item.revision)
        with self.assertRaises(MemoryConflictError):
            await asyncio.to_thread(self.lg.put, ("cas", "u1"), "k", {"v": 3}, expected_revision=item.revision)
        self.assertEqual((await self.lg.aget(("cas", "u1"), "k")).value, {"v": 2})
        stale = (await self.lg.asearch(("cas", "u1")))[0].revision
        await self.lg.aput(("cas", "u1"), "k", None, expected_revision=stale)
        self.assertIsNone(await self.lg.aget(("cas", "u1"), "k"))

    # --- isolation and erasure -------------------------------------------------------------

    async def test_a_bound_adapter_serves_one_user(self):
        await self.lg.aput(("memories", "u2"), "theirs", {"v": "u2"})
        mine = self.adapter(user_id="u1")
        await mine.aput(("memories", "u1"), "mine", {"v": "u1"})
        with self.assertRaises(InvalidNamespaceError) as raised:
            await mine.abatch(
                [PutOp(("memories", "u1"), "first", {"v": 1}), GetOp(("memories", "u2"), "theirs")]
            )
        self.assertIn("position 1", str(raised.exception))
        self.assertNotIn("u2", str(raised.exception))
        self.assertIsNone(await mine.aget(("memories", "u1"), "first"))  # nothing of the batch ran
        for refused in [
            mine.asearch(("memories", "u2")),
            mine.alist_namespaces(prefix=("memories", "u2")),
            mine.aerase_user("u2"),
            mine.adelete_namespace(("memories", "u2")),
        ]:
            with self.assertRaises(InvalidNamespaceError):
                await refused
        self.assertEqual([i.key for i in await mine.asearch(("memories",))], ["mine"])
        self.assertEqual([i.key for i in await mine.asearch(())], ["mine"])
        self.assertEqual(await mine.alist_namespaces(), [("memories", "u1")])
        self.assertEqual(await mine.alist_namespaces(prefix=("memories", "*")), [("memories", "u1")])

    async def test_per_user_views_share_the_store(self):
        await self.lg.aput(("memories", "u2"), "theirs", {"v": "u2"})
        view = self.lg.for_user("u1")
        await view.aput(("memories", "u1"), "mine", {"v": "u1"})
        with self.assertRaises(InvalidNamespaceError):
            await view.aget(("memories", "u2"), "theirs")
        with self.assertRaises(InvalidNamespaceError):
            view.for_user("u2")
        self.assertEqual([i.key for i in await asyncio.to_thread(view.search, ("memories",))], ["mine"])
        await asyncio.to_thread(view.close)
        # Closing a view leaves the adapter it came from (and its store and thread) working.
        self.assertEqual(len(await asyncio.to_thread(self.lg.search, ("memories",))), 2)
        with self.assertRaises(RuntimeError):
            await view.aget(("memories", "u1"), "mine")

    async def test_trusted_adapter_walks_users_and_erases(self):
        for user in ("u3", "u1", "u2"):
            await self.lg.aput(("memories", user), "k", {"v": user})
            await self.lg.aput(("memories", user, "extra"), "k", {"v": user})
        found = await self.lg.asearch(("memories",), filter={"v": {"$ne": "u2"}})
        self.assertEqual([i.namespace for i in found], [("memories", "u1"), ("memories", "u1", "extra"), ("memories", "u3"), ("memories", "u3", "extra")])
        self.assertEqual(await self.lg.aerase_user("u1"), 2)
        self.assertEqual(await asyncio.to_thread(self.lg.delete_namespace, ("memories", "u2", "extra")), 1)
        self.assertEqual(await self.lg.alist_namespaces(), [("memories", "u2"), ("memories", "u3"), ("memories", "u3", "extra")])
        self.assertEqual(await self.lg.adelete_namespace(("memories",)), 3)
        self.assertEqual(await self.lg.alist_namespaces(), [])

    # --- sync use ------------------------------------------------------------------------------

    async def test_sync_methods_from_any_thread(self):
        # A worker thread with no loop while this loop runs (LangGraph's sync graphs) ...
        await asyncio.to_thread(self.lg.put, ("s", "u1"), "a", {"v": 1})
        # ... a plain thread, and this thread with its loop running (it blocks, but answers).
        box = {}
        thread = threading.Thread(target=lambda: box.setdefault("item", self.lg.get(("s", "u1"), "a")))
        thread.start()
        thread.join(30)
        self.assertEqual(box["item"].value, {"v": 1})
        self.assertEqual(self.lg.list_namespaces(), [("s", "u1")])
        self.lg.delete(("s", "u1"), "a")
        self.assertIsNone(await self.lg.aget(("s", "u1"), "a"))
        sweeper = self.lg.start_ttl_sweeper(0.001)
        await asyncio.sleep(0.2)
        self.assertTrue(self.lg.stop_ttl_sweeper(5))
        self.assertTrue(sweeper.done())

    # --- frameworks on top ------------------------------------------------------------------

    async def test_langmem_tools_in_a_compiled_graph(self):
        from langmem import create_manage_memory_tool, create_search_memory_tool

        manage = create_manage_memory_tool(namespace=("memories", "{langgraph_user_id}"))
        search = create_search_memory_tool(namespace=("memories", "{langgraph_user_id}"))

        class State(TypedDict, total=False):
            calls: list
            results: list

        async def act(state):
            results = []
            for tool, arguments in state["calls"]:
                results.append(await (manage if tool == "manage" else search).ainvoke(arguments))
            return {"results": results}

        def act_sync(state):
            return {"results": [(manage if t == "manage" else search).invoke(a) for t, a in state["calls"]]}

        def graph(node):
            return one_node_graph(State, "act", node, self.lg)

        config = lambda user: {"configurable": {"langgraph_user_id": user}}  # noqa: E731
        facts = [f"fact {n:02d} about tea" for n in range(12)]
        out = await graph(act).ainvoke(
            {"calls": [("manage", {"content": fact}) for fact in facts]}, config("u1")
        )
        self.assertTrue(all(result.startswith("created memory") for result in out["results"]))
        other = await asyncio.to_thread(
            graph(act_sync).invoke, {"calls": [("manage", {"content": "u2 likes coffee"})]}, config("u2")
        )
        self.assertEqual(len(other["results"]), 1)
        records = await self.store.list(MemoryScope(self.app, "u1", "memories"), 100)
        self.assertEqual(len(records.items), 12)
        # Search pages past the first page with offset; only the user's own memories.
        out = await graph(act).ainvoke(
            {"calls": [("search", {"query": "tea", "limit": 5, "offset": o}) for o in (0, 5, 10)]}, config("u1")
        )
        import json

        pages = [json.loads(result) for result in out["results"]]
        self.assertEqual([len(page) for page in pages], [5, 5, 2])
        contents = sorted(item["value"]["content"] for page in pages for item in page)
        self.assertEqual(contents, sorted(facts))
        # Update and delete through the tool, by the id it reported.
        memory_id = pages[0][0]["key"]
        await graph(act).ainvoke(
            {"calls": [("manage", {"action": "update", "id": memory_id, "content": "updated"}), ("manage", {"action": "delete", "id": pages[0][1]["key"]})]},
            config("u1"),
        )
        self.assertEqual((await self.lg.aget(("memories", "u1"), memory_id)).value, {"content": "updated"})
        self.assertEqual(len((await self.store.list(MemoryScope(self.app, "u1", "memories"), 100)).items), 11)
        await self.lg.aerase_user("u1")
        out = await graph(act).ainvoke({"calls": [("search", {"query": "tea"})]}, config("u1"))
        self.assertEqual(json.loads(out["results"][0]), [])
        self.assertEqual(len(await self.lg.asearch(("memories", "u2"))), 1)

    async def test_deepagents_store_backend_in_a_graph(self):
        from deepagents.backends import StoreBackend

        backend = StoreBackend(namespace=lambda _runtime: ("memories", get_config()["configurable"]["user"]))

        class State(TypedDict, total=False):
            out: dict

        def files(state):
            for n in range(105):  # past deepagents' page of 100: its second page uses offset
                backend.write(f"/notes/{n:03d}.md", f"note {n}\nline two\n")
            backend.edit("/notes/007.md", "line two", "edited")
            return {
                "out": {
                    "ls": backend.ls("/notes/"),
                    "read": backend.read("/notes/007.md"),
                    "grep": backend.grep("edited"),
                    "glob": backend.glob("*.md", "/notes/"),
                }
            }

        async def afiles(state):
            await backend.awrite("/a.md", "async file\n")
            return {"out": {"read": await backend.aread("/a.md")}}

        def graph(node):
            return one_node_graph(State, "files", node, self.lg)

        config = {"configurable": {"user": "u1"}}
        out = (await asyncio.to_thread(graph(files).invoke, {}, config))["out"]
        listing = getattr(out["ls"], "entries", out["ls"])
        self.assertEqual(len(listing), 105, out["ls"])
        self.assertIn("edited", str(out["read"]))
        self.assertIn("/notes/007.md", str(out["grep"]))
        self.assertIn("/notes/104.md", str(out["glob"]))
        out = (await graph(afiles).ainvoke({}, config))["out"]
        self.assertIn("async file", str(out["read"]))
        scope = MemoryScope(self.app, "u1", "memories")
        self.assertIsNotNone(await self.store.get(scope, "/notes/000.md"))
        self.assertEqual(await self.lg.aerase_user("u1"), 106)
        out = (await asyncio.to_thread(graph(lambda s: {"out": {"ls": backend.ls("/notes/")}}).invoke, {}, config))["out"]
        self.assertEqual(len(getattr(out["ls"], "entries", out["ls"]) or []), 0)


class LifeCycle(unittest.TestCase):
    """The private loop thread never keeps a process alive: a program that used the sync
    methods (and a sweeper) and exits without ``close()`` ends at once, and so does one that
    closed."""

    def run_program(self, body):
        import subprocess
        import sys
        import textwrap

        program = textwrap.dedent(
            """
            from agent_memory import InMemoryStore
            from agent_memory.langgraph import AgentMemoryStore

            store = AgentMemoryStore(InMemoryStore(), application_id="app", user_at=1)
            store.put(("notes", "u1"), "k", {"v": 1})
            assert store.get(("notes", "u1"), "k").value == {"v": 1}
            """
        ) + textwrap.dedent(body)
        done = subprocess.run([sys.executable, "-W", "ignore", "-c", program], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertNotIn("Traceback", done.stderr)

    def test_exit_without_close(self):
        self.run_program("store.start_ttl_sweeper(0.001)\n")

    def test_exit_after_close(self):
        self.run_program(
            """
            store.close()
            store.close()
            try:
                store.get(("notes", "u1"), "k")
            except RuntimeError as error:
                assert "closed" in str(error)
            else:
                raise AssertionError("a closed adapter answered")
            """
        )


stamp(globals(), Cases, "LangGraphStore")
del Cases

if __name__ == "__main__":
    unittest.main()
