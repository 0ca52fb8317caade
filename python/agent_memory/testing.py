"""The conformance suite for memory stores, as a ``unittest`` mixin.

    import unittest
    from agent_memory.testing import MemoryStoreConformanceMixin
    from my_storage import MyMemoryStore

    class CustomMemoryTests(MemoryStoreConformanceMixin, unittest.IsolatedAsyncioTestCase):
        async def make_store(self):
            \"\"\"Return an unstarted provider for an isolated test database.\"\"\"
            return MyMemoryStore(...)

The mixin adds one ``test_<case>`` method per case of the Rust core's conformance suite: the
very cases the package's SQLite, PostgreSQL, Redis and in-process providers pass in Rust, one
rule each (isolation, revisions and conditional writes, expiry, paging and cursors, literal
search, erasure, namespaces, limits at their exact byte boundaries, hostile input,
concurrency, replicas, and the fact port and scoped handle over the store). Each test
starts the store, runs its case under a fresh random application id (so tests can share one
database and never wipe it), and closes the store. A broken rule fails the test with an
``AssertionError`` naming the rule and what was seen.

Optional hooks:

- ``async def make_replica(self)``: a second, independent, unstarted instance on the same
  datastore (what another replica of the application would build). The replica cases then
  race the two instances; without it they race tasks of one instance.
- ``def make_store_with_quotas(self, *, max_records_per_user, max_bytes_per_user)``: another
  unstarted instance on the same datastore (and clock) with those quotas (each an ``int`` or
  ``None``), for the quota cases; they raise ``MemoryQuotaError`` past a limit. A store
  without quotas leaves it undefined, and the quota cases are then skipped, saying so.
- ``self.clock``: when ``make_store`` builds a store that reads a ``ManualClock``, assign the
  clock to ``self.clock``; the expiry cases then move it instead of sleeping (about 3 s per
  expiry case otherwise, since the datastore's own clock decides).

Beside the core's cases, the mixin has cases of its own (``PYTHON_CASE_NAMES``) that call the
store's Python methods directly with the search options, as an application does: ``match``
(``"all_words"``, ``"any_word"``), ``ignore_case`` (Unicode simple case folding: the Kelvin
sign and ``k``, ``Σ``, ``σ`` and ``ς``, never ``ß`` and ``ss``), ``metadata`` filters on
``list`` and ``search`` (numbers by value, booleans, ``None``, strings; an absent field
matches nothing), cursors bound to the options, and the limits (a query of only white space
or of more than ``MAX_QUERY_WORDS`` words in a word mode, a filter of more than
``MAX_METADATA_FILTER_FIELDS`` fields, an unknown ``match``).

Stores written in Python are called with this package's types (``MemoryScope``, epoch-second
floats, revision and cursor strings) and must return them (``MemoryRecord``, ``MemoryPage``,
…) and raise this package's exceptions; ``agent_memory.provider`` has the core's checks and
cursors for them (a store may make cursor strings of its own instead, and judge them itself).
"""

from __future__ import annotations

import uuid
from typing import Any, Awaitable, Callable, Coroutine, Dict, List, Optional

from . import _native
from ._errors import MemoryValidationError
from ._native import MAX_METADATA_FILTER_FIELDS, MAX_QUERY_WORDS, ManualClock, MemoryScope

__all__ = ["CASE_NAMES", "PYTHON_CASE_NAMES", "ManualClock", "MemoryStoreConformanceMixin"]

#: Every case of the core's suite, in the core's order; one test method each.
CASE_NAMES = tuple(_native.conformance_case_names())


class MemoryStoreConformanceMixin:
    """Mix into ``unittest.IsolatedAsyncioTestCase`` and define ``make_store``."""

    clock: Optional[ManualClock] = None

    async def make_store(self) -> Any:
        """Return an unstarted store on an isolated test datastore."""
        raise NotImplementedError("define async def make_store(self) returning an unstarted store")

    async def make_replica(self) -> Any:
        """Return a second unstarted instance on the same datastore, or None (the default)."""
        return None

    make_store_with_quotas: Optional[Callable[..., Any]] = None

    async def run_conformance_case(self, name: str) -> None:
        """Runs the core's case ``name`` against a fresh store from ``make_store``."""
        with_quotas = self.make_store_with_quotas
        if name.startswith("quota_") and with_quotas is None:
            skip = getattr(self, "skipTest", None)
            if skip is not None:
                skip("the store has no quotas: define make_store_with_quotas to run this case")
            return
        store = await self.make_store()
        replica = await self.make_replica()
        clock = self.clock if isinstance(self.clock, ManualClock) else None
        await _native.run_conformance_case(name, store, replica, clock, with_quotas)


def _case_test(name: str) -> Callable[[Any], Coroutine[Any, Any, None]]:
    async def test(self: MemoryStoreConformanceMixin) -> None:
        await self.run_conformance_case(name)

    test.__name__ = f"test_{name}"
    test.__qualname__ = f"MemoryStoreConformanceMixin.test_{name}"
    test.__doc__ = f"Conformance case {name} of the agent-memory core."
    return test


for _name in CASE_NAMES:
    setattr(MemoryStoreConformanceMixin, f"test_{_name}", _case_test(_name))
del _name


# --- the Python API's cases: search options ---------------------------------------------------


async def _keys(pages: Callable[[Optional[str]], Awaitable[Any]]) -> List[str]:
    """Every key of a paged call (``pages(after)``), following cursors to the end, in order."""
    keys: List[str] = []
    after: Optional[str] = None
    for _ in range(1_000):
        page = await pages(after)
        keys.extend(record.key for record in page.items)
        after = page.next_cursor
        if after is None:
            return keys
    raise AssertionError("a paged call never ended (a cursor that does not advance)")


class _Case:
    """One case's store, started, under a fresh random application id."""

    def __init__(self, mixin: "MemoryStoreConformanceMixin") -> None:
        self.mixin = mixin
        self.scope = MemoryScope(f"conformance-py-{uuid.uuid4().hex}", "user")

    async def __aenter__(self) -> "_Case":
        self.store = await self.mixin.make_store()
        await self.store.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.store.close()

    async def put(self, key: str, content: str, metadata: Optional[Dict[str, Any]] = None) -> None:
        await self.store.put(self.scope, key, content, metadata=metadata)

    async def search(self, query: str, limit: int = 2, **options: Any) -> List[str]:
        """Every key the search finds, two to a page."""
        store, scope = self.store, self.scope
        return await _keys(lambda after: store.search(scope, query, limit, after, **options))

    async def list(self, limit: int = 2, **options: Any) -> List[str]:
        store, scope = self.store, self.scope
        return await _keys(lambda after: store.list(scope, limit, after, **options))

    async def refused(self, field: str, call: Awaitable[Any], rule: str) -> None:
        try:
            await call
        except MemoryValidationError as error:
            if getattr(error, "field", None) != field:
                raise AssertionError(f"{rule}: MemoryValidationError names {error.field!r}, not {field!r}") from None
            return
        raise AssertionError(f"{rule}: no MemoryValidationError naming {field!r}")


def _equal(seen: Any, wanted: Any, rule: str) -> None:
    if seen != wanted:
        raise AssertionError(f"{rule}: expected {wanted!r}, got {seen!r}")


async def _search_all_words(self: "MemoryStoreConformanceMixin") -> None:
    """``match="all_words"``: every word, in any order, anywhere; split on Unicode white space."""
    async with _Case(self) as case:
        await case.put("a", "Prefers the Berlin warehouse")
        await case.put("b", "warehouse in Hamburg, office in Berlin")
        await case.put("c", "Berlin office")
        await case.put("d", "the warehouse")
        _equal(await case.search("warehouse Berlin", match="all_words"), ["a", "b"], "all_words: every word, any order, anywhere")
        _equal(await case.search("Berlin\u3000 office\t", match="all_words"), ["b", "c"], "all_words splits on Unicode white space")
        _equal(await case.search("warehouse Berlin"), [], "the default stays one phrase")
        _equal(await case.search("warehouse berlin", match="all_words"), [], "all_words alone is case-sensitive")
        _equal(await case.search("ware hous", match="all_words"), ["a", "b", "d"], "words are substrings")


async def _search_any_word(self: "MemoryStoreConformanceMixin") -> None:
    """``match="any_word"``: one word is enough; an unknown mode names ``match``."""
    async with _Case(self) as case:
        await case.put("a", "drinks tea")
        await case.put("b", "drinks coffee")
        await case.put("c", "Coffee and TEA")
        await case.put("d", "water")
        _equal(await case.search("tea coffee", match="any_word"), ["a", "b"], "any_word: one word is enough")
        _equal(await case.search("tea coffee", match="any_word", ignore_case=True), ["a", "b", "c"], "any_word ignoring case")
        _equal(await case.search("milk juice", match="any_word"), [], "any_word: no word, no match")
        await case.refused("match", case.store.search(case.scope, "tea", match="regex"), "an unknown match mode")


async def _search_ignore_case(self: "MemoryStoreConformanceMixin") -> None:
    """``ignore_case=True`` folds simply: the Kelvin sign and k, Σ σ ς, ß and ẞ but never ss."""
    async with _Case(self) as case:
        await case.put("berlin", "Prefers the BERLIN Warehouse")
        await case.put("kelvin", "300 \u212a outside")  # the Kelvin sign
        await case.put("k", "k-9 unit")
        await case.put("sharp", "Straße")
        await case.put("capital-sharp", "STRA\u1e9eE")
        await case.put("ss", "Strasse")
        await case.put("sigma", "ΟΔΟΣ")
        await case.put("final", "οδος")
        await case.put("dotted", "İstanbul")
        search = case.search
        _equal(await search("berlin warehouse", match="all_words", ignore_case=True), ["berlin"], "all_words ignoring case")
        _equal(await search("berlin", ignore_case=False), [], "case counts by default")
        _equal(await search("K", ignore_case=True), ["k", "kelvin"], "K matches k and the Kelvin sign")
        _equal(await search("\u212a", ignore_case=True), ["k", "kelvin"], "the Kelvin sign matches k")
        _equal(await search("\u212a"), ["kelvin"], "the Kelvin sign alone, case-sensitive")
        _equal(await search("straße", ignore_case=True), ["capital-sharp", "sharp"], "ß matches ẞ")
        _equal(await search("ss", ignore_case=True), ["ss"], "ss never matches ß (simple folding, not full)")
        _equal(await search("STRASSE", ignore_case=True), ["ss"], "ß is not ss")
        _equal(await search("οδοσ", ignore_case=True), ["final", "sigma"], "σ matches Σ and ς")
        _equal(await search("ΟΔΟΣ", ignore_case=True), ["final", "sigma"], "Σ matches σ and ς")
        _equal(await search("ς", ignore_case=True), ["final", "sigma"], "ς matches Σ")
        _equal(await search("istanbul", ignore_case=True), [], "İ folds to itself in simple folding")


async def _metadata_filters(self: "MemoryStoreConformanceMixin") -> None:
    """``metadata=`` on ``list`` and ``search``: equality by type, every field, at most 8."""
    async with _Case(self) as case:
        await case.put("int", "note", {"n": 1, "category": "preferences"})
        await case.put("float", "note", {"n": 1.0})
        await case.put("text", "note", {"n": "1"})
        await case.put("true", "note", {"n": True, "pinned": True})
        await case.put("null", "note", {"n": None})
        await case.put("absent", "note", {"category": "preferences"})
        await case.put("nested", "note", {"n": [1], "category": {"x": 1}})
        await case.put("other", "other text", {"n": 1, "pinned": False})
        await case.put("bare", "note")
        for filter_, wanted in [
            ({"n": 1}, ["float", "int", "other"]),
            ({"n": 1.0}, ["float", "int", "other"]),
            ({"n": "1"}, ["text"]),
            ({"n": True}, ["true"]),
            ({"n": None}, ["null"]),
            ({"missing": None}, []),
            ({"category": "preferences"}, ["absent", "int"]),
            ({"category": "preferences", "n": 1}, ["int"]),
            ({"pinned": False}, ["other"]),
            ({}, ["absent", "bare", "float", "int", "nested", "null", "other", "text", "true"]),
        ]:
            _equal(await case.list(metadata=filter_), wanted, f"list with the filter {filter_!r}")
        _equal(await case.search("note", metadata={"n": 1}), ["float", "int"], "search with a filter")
        _equal(await case.search("NOTE TEXT", match="any_word", ignore_case=True, metadata={"n": 1}), ["float", "int", "other"], "a filter with the other options")
        _equal(await case.search("note", metadata={"pinned": True}), ["true"], "booleans equal only booleans")
        too_many = {f"f{i}": i for i in range(MAX_METADATA_FILTER_FIELDS + 1)}
        await case.refused("metadata", case.store.list(case.scope, metadata=too_many), "a filter of too many fields, on list")
        await case.refused("metadata", case.store.search(case.scope, "note", metadata=too_many), "a filter of too many fields, on search")
        most = {f"f{i}": i for i in range(MAX_METADATA_FILTER_FIELDS)}
        _equal(await case.list(metadata=most), [], "a filter of the most fields")
        await case.refused("metadata", case.store.list(case.scope, metadata={"n": [1]}), "a filter value that is not a scalar")


async def _cursors_bound_to_options(self: "MemoryStoreConformanceMixin") -> None:
    """A cursor continues only a request with the same mode, case and filter."""
    async with _Case(self) as case:
        for key in "abcde":
            await case.put(key, f"Tea and coffee {key}", {"n": 1})
        store, scope = case.store, case.scope

        async def cursor(call: Callable[[Optional[str]], Awaitable[Any]]) -> str:
            after: Optional[str] = None
            for _ in range(100):
                page = await call(after)
                after = page.next_cursor
                if page.items:
                    if after is None:
                        raise AssertionError("a page of one of five records has no cursor")
                    return after
            raise AssertionError("no page held a record")

        options = dict(match="all_words", ignore_case=True, metadata={"n": 1})
        after = await cursor(lambda a: store.search(scope, "tea COFFEE", 1, a, **options))
        page = await store.search(scope, "tea COFFEE", 4, after, **options)
        _equal([r.key for r in page.items], ["b", "c", "d", "e"], "the cursor continues the same search")
        for name, other in [
            ("another match mode", dict(options, match="any_word")),
            ("the phrase", dict(options, match="phrase")),
            ("another case", dict(options, ignore_case=False)),
            ("another filter", dict(options, metadata={"n": 2})),
            ("no filter", dict(options, metadata=None)),
        ]:
            await case.refused("cursor", store.search(scope, "tea COFFEE", 1, after, **other), f"a search cursor reused with {name}")
        listed = await cursor(lambda a: store.list(scope, 1, a, metadata={"n": 1}))
        await case.refused("cursor", store.list(scope, 1, listed), "a filtered listing's cursor reused without the filter")
        await case.refused("cursor", store.list(scope, 1, listed, metadata={"n": 2}), "a listing's cursor reused with another filter")
        plain = await cursor(lambda a: store.list(scope, 1, a))
        await case.refused("cursor", store.list(scope, 1, plain, metadata={"n": 1}), "a plain listing's cursor reused with a filter")


async def _word_queries_are_checked(self: "MemoryStoreConformanceMixin") -> None:
    """A word mode needs a word and takes at most ``MAX_QUERY_WORDS``; a phrase has no limit."""
    async with _Case(self) as case:
        await case.put("a", " ".join(f"w{i}" for i in range(MAX_QUERY_WORDS + 1)))
        store, scope = case.store, case.scope
        for match in ("all_words", "any_word"):
            await case.refused("query", store.search(scope, " \t\u3000 ", match=match), f"a query of only white space, {match}")
            words = " ".join(f"w{i}" for i in range(MAX_QUERY_WORDS + 1))
            await case.refused("query", store.search(scope, words, match=match), f"more than {MAX_QUERY_WORDS} words, {match}")
            most = " ".join(f"w{i}" for i in range(MAX_QUERY_WORDS))
            _equal(await case.search(most, match=match), ["a"], f"{MAX_QUERY_WORDS} words, {match}")
        words = " ".join(f"w{i}" for i in range(MAX_QUERY_WORDS + 1))
        _equal(await case.search(words), ["a"], "a phrase has no word limit")


_PYTHON_CASES: Dict[str, Callable[[Any], Coroutine[Any, Any, None]]] = {
    "search_all_words": _search_all_words,
    "search_any_word": _search_any_word,
    "search_ignore_case_folds_simply": _search_ignore_case,
    "metadata_filters_list_and_search": _metadata_filters,
    "cursors_are_bound_to_search_options": _cursors_bound_to_options,
    "word_queries_are_checked": _word_queries_are_checked,
}

#: The cases of the Python API's own, one test method each (``test_python_<name>``).
PYTHON_CASE_NAMES = tuple(_PYTHON_CASES)


def _python_case_test(name: str) -> Callable[[Any], Coroutine[Any, Any, None]]:
    case = _PYTHON_CASES[name]

    async def test(self: MemoryStoreConformanceMixin) -> None:
        await case(self)

    test.__name__ = f"test_python_{name}"
    test.__qualname__ = f"MemoryStoreConformanceMixin.test_python_{name}"
    test.__doc__ = case.__doc__ or f"Python API case {name}."
    return test


for _name in PYTHON_CASE_NAMES:
    setattr(MemoryStoreConformanceMixin, f"test_python_{_name}", _python_case_test(_name))
del _name
