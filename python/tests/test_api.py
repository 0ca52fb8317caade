"""The Python API itself: the seeds' examples, errors, reprs, types, and the layers over a
store written in Python. The contract's rules are the conformance suite's job."""

import asyncio
import inspect
import tempfile
import time
import unittest

import agent_memory
from agent_memory import (
    Facts,
    InMemoryStore,
    MemoryConflictError,
    MemoryPage,
    MemoryScope,
    MemorySource,
    MemoryStorageError,
    MemoryStore,
    MemoryValidationError,
    PostgresMemoryStore,
    RedisMemoryStore,
    ScopedMemory,
    SqliteMemoryStore,
    open_store,
)
from agent_memory import _native

from reference_store import DictStore

SECRET = "s3cr3t-never-shown"


async def purge_namespace(store: MemoryStore, scope: MemoryScope) -> int:
    """The seed's sweep, unchanged but for the import."""
    cursor, removed = None, 0
    while True:
        page = await store.purge_expired(scope, limit=100, after=cursor)
        removed += page.deleted
        cursor = page.next_cursor
        if cursor is None:
            return removed


class SeedExamples(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.store = InMemoryStore()
        await self.store.start()
        self.memory = self.store.scoped(MemoryScope("support-bot", "user-42"))

    async def test_write_deliberately_from_a_tool(self):
        record = await self.memory.put(
            key="report-preference",
            content="Use bullet points.",
            metadata={"category": "preferences"},
        )
        self.assertEqual({"saved": True, "revision": record.revision}["revision"], record.revision)
        preferences = self.memory.namespace("preferences")
        self.assertIsNone(await preferences.get("report-format"))
        await preferences.put("report-format", "Start with an executive summary.")
        self.assertEqual((await preferences.get("report-format")).content, "Start with an executive summary.")
        self.assertIsNone(await self.memory.get("report-format"))

    async def test_search_then_page_and_update_with_a_revision(self):
        for i in range(7):
            await self.memory.put(f"note-{i}", f"an executive summary, number {i}")
        keys, cursor = [], None
        while True:
            page = await self.memory.search("executive summary", limit=5, after=cursor)
            keys += [record.key for record in page.items]
            cursor = page.next_cursor
            if cursor is None:
                break
        self.assertEqual(keys, [f"note-{i}" for i in range(7)])

        record = await self.memory.get("note-3")
        updated = await self.memory.put(
            record.key, "Use bullet points and include a summary.", expected_revision=record.revision
        )
        with self.assertRaises(MemoryConflictError):
            await self.memory.put(record.key, "stale", expected_revision=record.revision)
        self.assertTrue(await self.memory.delete(updated.key, expected_revision=updated.revision))

    async def test_trusted_maintenance(self):
        scope = MemoryScope("support-bot", "user-42")
        await self.store.put(scope, "soon", "gone soon", expires_at=time.time() + 0.05)
        await self.store.put(scope, "stays", "stays")
        await asyncio.sleep(0.1)
        self.assertEqual(await purge_namespace(self.store, scope), 1)
        self.assertEqual(await self.store.delete_all(scope), 1)
        await self.store.put(scope.with_namespace("a"), "k", "v")
        page = await self.store.list_namespaces("support-bot", "user-42")
        self.assertEqual([s.namespace for s in page.items], ["a"])
        users = await self.store.list_users("support-bot", limit=5)
        self.assertEqual(users.items, ("user-42",))
        self.assertIsNone(users.next_cursor)
        apps = await self.store.list_applications(limit=1)
        self.assertEqual(apps.items, ("support-bot",))
        self.assertIsNone(apps.next_cursor)
        self.assertEqual(await self.store.delete_user("support-bot", "user-42"), 1)
        self.assertEqual((await self.store.list_applications()).items, ())

    async def test_fact_port(self):
        memory = Facts(self.store)
        berlin = await memory.remember("tenant-a", "user-42", "prefers the Berlin warehouse")
        await memory.remember("tenant-a", "user-42", "prefers metric units")
        self.assertEqual([f.text for f in await memory.recall("tenant-a", "user-42", limit=1)],
                         ["prefers the Berlin warehouse"])
        self.assertTrue(await memory.forget("tenant-a", "user-42", berlin.id))
        self.assertFalse(await memory.forget("tenant-a", "user-42", berlin.id))
        self.assertEqual(await memory.erase("tenant-a", "user-42"), 1)
        self.assertEqual(await memory.recall("tenant-a", "user-42"), ())


class LayersOverAPythonStore(unittest.IsolatedAsyncioTestCase):
    """The core's fact port and scoped handle run over a store written in Python."""

    async def test_facts_and_scoped_memory(self):
        store = DictStore()
        await store.start()
        facts = Facts(store, source={"agent": "planner"})
        fact = await facts.remember("tenant-a", "user-1", "likes tea")
        record = await store.get(MemoryScope("tenant-a", "user-1", "facts"), fact.id)
        self.assertEqual(record.content, "likes tea")
        self.assertEqual(record.source.agent, "planner")
        memory = ScopedMemory(store, MemoryScope("tenant-a", "user-1"), source=MemorySource(session_id="s-1"))
        saved = await memory.put("k", "v")
        self.assertEqual(saved.source.session_id, "s-1")
        self.assertEqual([r.key for r in (await memory.list()).items], ["k"])
        await memory.put("notes/a", "v")
        await memory.put("notes/b", "v")
        first = await memory.list(limit=1, prefix="notes/")
        self.assertEqual([r.key for r in first.items], ["notes/a"])
        rest = await memory.list(limit=1, after=first.next_cursor, prefix="notes/")
        self.assertEqual([r.key for r in rest.items], ["notes/b"])
        with self.assertRaises(MemoryValidationError):
            await memory.list(after=first.next_cursor)  # the cursor belongs to the prefix
        self.assertEqual(await facts.erase("tenant-a", "user-1"), 4)

    async def test_a_python_stores_own_exception_comes_back_unchanged(self):
        class Failing(DictStore):
            async def get(self, scope, key):
                raise KeyError("the store's own error")

        store = Failing()
        await store.start()
        with self.assertRaises(KeyError):
            await ScopedMemory(store, MemoryScope("a", "u")).get("k")


class SearchOptions(unittest.IsolatedAsyncioTestCase):
    """``match``, ``ignore_case`` and ``metadata`` through the bindings: checked before any
    I/O on every entry point, and handed to a store written in Python as keywords only when
    they are not the defaults. What they select is the conformance cases' job."""

    async def asyncSetUp(self):
        self.scope = MemoryScope("app", "user")

    async def test_options_are_checked_and_name_their_argument(self):
        store = InMemoryStore()
        await store.start()
        handle = store.scoped(self.scope)
        searches = [
            lambda **o: store.search(self.scope, "tea", **o),
            lambda **o: handle.search("tea", **o),
        ]
        listings = [lambda **o: store.list(self.scope, **o), lambda **o: handle.list(**o)]
        cases = [
            ("match", {"match": "regex"}),
            ("match", {"match": "ALL_WORDS"}),
            ("match", {"match": 1}),
            ("metadata", {"metadata": "category=preferences"}),
            ("metadata", {"metadata": {"tags": ["a"]}}),
            ("metadata", {"metadata": {"nested": {"a": 1}}}),
            ("metadata", {"metadata": {"n": float("inf")}}),
            ("metadata", {"metadata": {"n": 2**70}}),
            ("metadata", {"metadata": {f"f{i}": i for i in range(agent_memory.MAX_METADATA_FILTER_FIELDS + 1)}}),
        ]
        for field, options in cases:
            for call in searches:
                with self.subTest(field=field, options=options), self.assertRaises(MemoryValidationError) as caught:
                    await call(**options)
                self.assertEqual(caught.exception.field, field)
            if "metadata" in options:
                for call in listings:
                    with self.subTest(field=field, listing=True), self.assertRaises(MemoryValidationError) as caught:
                        await call(**options)
                    self.assertEqual(caught.exception.field, field)
        with self.assertRaises(TypeError):
            await store.list(self.scope, match="all_words")
        # The defaults, spelled out, are the plain request.
        await store.put(self.scope, "k", "Tea")
        page = await store.search(self.scope, "Tea", match="phrase", ignore_case=False, metadata=None)
        self.assertEqual([r.key for r in page.items], ["k"])
        self.assertEqual([r.key for r in (await handle.list(metadata={})).items], ["k"])

    async def test_a_python_store_gets_the_options_as_keywords_only_when_set(self):
        calls = []

        class Recording(DictStore):
            async def list(self, scope, limit=20, after=None, prefix="", **options):
                calls.append(("list", options))
                return await super().list(scope, limit, after, prefix, **options)

            async def search(self, scope, query, limit=20, after=None, **options):
                calls.append(("search", options))
                return await super().search(scope, query, limit, after, **options)

        store = Recording()
        await store.start()
        handle = ScopedMemory(store, self.scope)
        await handle.put("a", "Prefers the BERLIN warehouse", metadata={"category": "preferences", "n": 1})
        await handle.put("b", "berlin office", metadata={"category": "other"})
        self.assertEqual([r.key for r in (await handle.search("berlin")).items], ["b"])
        await handle.list()
        self.assertEqual(calls, [("search", {}), ("list", {})])
        calls.clear()
        found = await handle.search("warehouse berlin", match="all_words", ignore_case=True, metadata={"n": 1.0})
        self.assertEqual([r.key for r in found.items], ["a"])
        listed = await handle.list(metadata={"category": "other"})
        self.assertEqual([r.key for r in listed.items], ["b"])
        self.assertEqual(
            calls,
            [
                ("search", {"match": "all_words", "ignore_case": True, "metadata": {"n": 1.0}}),
                ("list", {"metadata": {"category": "other"}}),
            ],
        )
        # A bad option never reaches the store.
        calls.clear()
        with self.assertRaises(MemoryValidationError):
            await handle.search("x", match="regex")
        self.assertEqual(calls, [])

    async def test_a_store_written_before_the_options_still_serves_plain_requests(self):
        class Older(DictStore):
            async def list(self, scope, limit=20, after=None, prefix=""):
                return await super().list(scope, limit, after, prefix)

            async def search(self, scope, query, limit=20, after=None):
                return await super().search(scope, query, limit, after)

        store = Older()
        await store.start()
        handle = ScopedMemory(store, self.scope)
        await handle.put("k", "likes tea")
        self.assertEqual([r.key for r in (await handle.search("tea")).items], ["k"])
        self.assertEqual([r.key for r in (await handle.list()).items], ["k"])
        # Asked for an option it cannot honour, it fails loudly rather than ignoring it.
        with self.assertRaises(TypeError):
            await handle.search("TEA", ignore_case=True)

    async def test_provider_helpers(self):
        from agent_memory import provider

        self.assertEqual(provider.fold_case("\u212aelvin ΣΑΣ ς Straße İ"), "kelvin σασ σ straße İ")
        self.assertNotEqual(provider.fold_case("Straße"), "Straße".casefold())  # full folding: ss
        self.assertEqual(provider.search_words(" Berlin\u3000WAREHOUSE ", match="all_words", ignore_case=True), ["berlin", "warehouse"])
        self.assertEqual(provider.search_words(" Berlin  x ", ignore_case=False), [" Berlin  x "])
        with self.assertRaises(MemoryValidationError) as caught:
            provider.check_query("   ", match="any_word")
        self.assertEqual(caught.exception.field, "query")
        provider.check_query("   ")  # a phrase of spaces is a literal
        many = " ".join(["w"] * (agent_memory.MAX_QUERY_WORDS + 1))
        with self.assertRaises(MemoryValidationError):
            provider.search_words(many, match="all_words")
        cursor = provider.key_cursor("search", self.scope, "k", match="any_word", metadata={"n": 1})
        self.assertEqual(provider.key_page("search", self.scope, 1, cursor, match="any_word", metadata={"n": 1.0}), "k")
        for other in ({"match": "all_words", "metadata": {"n": 1}}, {"match": "any_word"}, {"match": "any_word", "metadata": {"n": 1}, "ignore_case": True}):
            with self.subTest(other=other), self.assertRaises(MemoryValidationError) as caught:
                provider.key_page("search", self.scope, 1, cursor, **other)
            self.assertEqual(caught.exception.field, "cursor")
        with self.assertRaises(MemoryValidationError) as caught:
            provider.key_page("list", self.scope, 1, match="all_words")
        self.assertEqual(caught.exception.field, "match")
        with self.assertRaises(MemoryValidationError) as caught:
            provider.key_page("purge", self.scope, 1, metadata={"n": 1})
        self.assertEqual(caught.exception.field, "metadata")


class Errors(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.store = InMemoryStore()
        await self.store.start()
        self.scope = MemoryScope("app", "user")

    async def test_classes(self):
        self.assertTrue(issubclass(MemoryValidationError, ValueError))
        for cls in (MemoryValidationError, MemoryConflictError, MemoryStorageError):
            self.assertTrue(issubclass(cls, agent_memory.MemoryError))
        self.assertFalse(issubclass(agent_memory.MemoryError, MemoryError))  # not the built-in

    async def test_validation_names_the_field_and_never_the_content(self):
        with self.assertRaises(MemoryValidationError) as caught:
            await self.store.put(self.scope, "k", SECRET * 10_000)
        self.assertEqual(caught.exception.field, "content")
        self.assertEqual(str(caught.exception), "invalid content: must be at most 65536 bytes")
        self.assertNotIn(SECRET, repr(caught.exception))
        with self.assertRaises(MemoryValidationError) as caught:
            MemoryScope("app", "")
        self.assertEqual(caught.exception.field, "user_id")

    async def test_argument_shapes_are_checked_before_anything_changes(self):
        for bad in ({"metadata": {1, 2}}, {"metadata": {"x": float("nan")}}, {"expires_at": time.time() - 1},
                    {"expected_revision": "1", "create_only": True}, {"source": {"who": "x"}}):
            with self.subTest(bad=bad), self.assertRaises(MemoryValidationError):
                await self.store.put(self.scope, "k", "v", **bad)
        looped = []
        looped.append(looped)
        with self.assertRaises(MemoryValidationError):
            await self.store.put(self.scope, "k", "v", metadata={"loop": looped})
        with self.assertRaises(MemoryValidationError):
            await self.store.list(self.scope, limit=-1)
        with self.assertRaises(MemoryValidationError):
            await self.store.list(self.scope, after="not a cursor")
        with self.assertRaises(TypeError):
            await self.store.put(self.scope, "k", 42)
        self.assertEqual((await self.store.list(self.scope)).items, ())

    async def test_operations_before_start_are_storage_errors(self):
        with tempfile.TemporaryDirectory() as directory:
            store = SqliteMemoryStore(f"{directory}/m.db")
            with self.assertRaises(MemoryStorageError) as caught:
                await store.get(self.scope, "k")
            self.assertEqual(caught.exception.provider, "sqlite")
            async with store:
                await store.put(self.scope, "k", "v")
            with self.assertRaises(MemoryStorageError):
                await store.get(self.scope, "k")

    async def test_pool_options_are_checked(self):
        with self.assertRaises(MemoryValidationError) as caught:
            PostgresMemoryStore("postgres://u@127.0.0.1/db", pool_options={"size": 3})
        self.assertEqual(caught.exception.field, "pool_options")
        with self.assertRaises(MemoryValidationError):
            PostgresMemoryStore("postgres://u@127.0.0.1/db", pool_options={"min_size": 9, "max_size": 2})

    async def test_a_rust_panic_is_an_exception_not_an_abort(self):
        for pending in (False, True):
            with self.subTest(pending=pending), self.assertRaises(RuntimeError) as caught:
                await _native._panic_probe(pending)
            self.assertIn("internal error", str(caught.exception))


class Reprs(unittest.TestCase):
    def test_nothing_private_is_shown(self):
        scope = MemoryScope("app-" + SECRET, "user-" + SECRET, "ns-" + SECRET)
        record = agent_memory.MemoryRecord(scope, "key-" + SECRET, SECRET, {"m": SECRET}, "1", 1.0, 2.0)
        page = MemoryPage([record], "cursor")
        shown = [repr(scope), repr(record), repr(page), repr(MemorySource(session_id=SECRET)),
                 repr(PostgresMemoryStore(f"postgres://user:{SECRET}@127.0.0.1/db")),
                 repr(RedisMemoryStore(f"redis://:{SECRET}@127.0.0.1:6379/0")),
                 repr(SqliteMemoryStore(f"/tmp/{SECRET}/m.db")),
                 repr(ScopedMemory(InMemoryStore(), scope))]
        for text in shown:
            self.assertNotIn(SECRET, text)


class Types(unittest.IsolatedAsyncioTestCase):
    async def test_records_are_frozen_floats_and_detached(self):
        store = InMemoryStore()
        await store.start()
        scope = MemoryScope("app", "user")
        before = time.time()
        record = await store.put(scope, "k", "v", metadata={"tags": ["a"]}, expires_at=before + 60)
        self.assertIsInstance(record.created_at, float)
        self.assertGreaterEqual(record.created_at, before - 1)
        self.assertAlmostEqual(record.expires_at, before + 60, delta=1e-5)
        with self.assertRaises(AttributeError):
            record.content = "changed"
        record.metadata["tags"].append("b")
        self.assertEqual(record.metadata, {"tags": ["a"]})
        self.assertEqual(record, await store.get(scope, "k"))
        self.assertEqual(record.scope, scope)
        self.assertEqual(hash(scope), hash(MemoryScope("app", "user")))

    async def test_methods_are_coroutines_and_stores_are_memory_stores(self):
        for cls in (InMemoryStore, SqliteMemoryStore, PostgresMemoryStore, RedisMemoryStore, DictStore):
            self.assertTrue(inspect.iscoroutinefunction(cls.put))
        self.assertIsInstance(InMemoryStore(), MemoryStore)
        self.assertIsInstance(DictStore(), MemoryStore)
        store = InMemoryStore()
        await store.start()
        task = asyncio.create_task(store.put(MemoryScope("a", "u"), "k", "v"))
        self.assertEqual((await task).key, "k")
        self.assertIsInstance(open_store("memory:"), InMemoryStore)
        self.assertIsInstance(open_store("sqlite:/tmp/x.db"), SqliteMemoryStore)

    async def test_concurrent_tasks_on_sqlite(self):
        with tempfile.TemporaryDirectory() as directory:
            async with SqliteMemoryStore(f"{directory}/m.db") as store:
                scope = MemoryScope("app", "user")
                records = await asyncio.gather(*(store.put(scope, f"k{i}", str(i)) for i in range(50)))
                self.assertEqual(len({r.revision for r in records}), 50)
                self.assertEqual(len((await store.list(scope, limit=100)).items), 50)


if __name__ == "__main__":
    unittest.main()
