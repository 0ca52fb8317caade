"""How the LangGraph adapter (``agent_memory.langgraph``) searches: the core search that
narrows a namespace's records to candidates, and the checks of ``query`` and ``filter`` on
each candidate's value."""

from __future__ import annotations

import json
import re
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    List,
    Mapping,
    NamedTuple,
    Optional,
)

from ._langgraph_namespaces import PAGE, Budget, paged
from ._native import (
    MAX_QUERY_BYTES,
    MAX_QUERY_WORDS,
    MemoryPage,
    MemoryRecord,
    MemoryScope,
    fold_case,
)
from ._protocol import MemoryStore

# How the adapter matches ``query``: every word, ignoring case, in the value's string fields.
# The core's search with these options narrows the candidates (see ``narrowing_of``), and
# ``text_matches`` confirms each against the string fields alone.
QUERY_MATCH = "all_words"
QUERY_IGNORE_CASE = True


async def candidates(
    store: MemoryStore,
    scope: MemoryScope,
    narrowing: Optional["Narrowing"],
    budget: Budget,
    missing: Callable[[], int],
    exact: bool,
) -> "AsyncIterator[MemoryRecord]":
    """The live records of one namespace in key order: every one without a narrowing,
    else the core's candidates for it (a superset of the matches, which the caller
    checks). With ``exact``, each page asks for no more than the ``missing()`` results."""

    def read(after: Optional[str]) -> Awaitable[MemoryPage]:
        limit = max(1, min(PAGE, missing())) if exact else PAGE
        if narrowing is None:
            return store.list(scope, limit, after)
        return store.search(
            scope,
            narrowing.text,
            limit,
            after,
            match=narrowing.match,
            ignore_case=narrowing.ignore_case,
        )

    async for record in paged(read):
        budget.spend("records")
        yield record


def _json_text(word: str) -> str:
    """``word`` as it reads inside compact JSON text: JSON escapes character by character
    (and folding never makes or unmakes an escape), so a string field containing the word
    holds this text in the record's content, in either case."""
    return json.dumps(word, ensure_ascii=False)[1:-1]


class Narrowing(NamedTuple):
    """A core search whose results are a superset of a LangGraph search's matches."""

    text: str
    match: str
    ignore_case: bool


def narrowing_of(words: Optional[List[str]], filter: Optional[Mapping[str, Any]]) -> Optional[Narrowing]:
    """What the datastore can look for: the query's words as they read in the value's JSON
    text (every one, ignoring case), and the filter's equalities of a string, boolean or null
    at the top level as they read there (``"kind":"note"``: the adapter writes values as
    compact JSON, so an item whose field equals that value holds exactly this text). Without a
    query, the longest such equality alone, case-sensitive, as a phrase. ``None`` when there is
    nothing to narrow by: the namespace is listed."""
    needles = _filter_needles(filter or {})
    if words:
        # A needle with white space cannot be one word; leaving it out keeps a superset.
        texts = [_json_text(word) for word in words]
        texts += [n for n in needles if not _WHITE_SPACE.search(n)]
        return Narrowing(_first_words(texts), QUERY_MATCH, QUERY_IGNORE_CASE)
    if needles:
        longest = max(needles, key=len)
        return Narrowing(_cut(longest, MAX_QUERY_BYTES), "phrase", False)
    return None


def _filter_needles(filter: Mapping[str, Any]) -> List[str]:
    """The JSON text ``"field":value`` of each equality on a string, boolean or null (numbers
    have more than one spelling: ``1`` and ``1.0`` are equal)."""
    needles = []
    for field, wanted in filter.items():
        if isinstance(wanted, dict) and list(wanted) == ["$eq"]:
            wanted = wanted["$eq"]
        if wanted is None or isinstance(wanted, (str, bool)):
            key = json.dumps(field, ensure_ascii=False)
            needles.append(f"{key}:{json.dumps(wanted, ensure_ascii=False)}")
    return needles


def _first_words(texts: List[str]) -> str:
    """As many of the words as one core query takes (``MAX_QUERY_WORDS`` words,
    ``MAX_QUERY_BYTES`` bytes; a word too long alone is looked for by its start): a record
    holding every word holds any of them, and any word's start."""
    taken: List[str] = []
    size = -1
    for text in texts[:MAX_QUERY_WORDS]:
        if not taken:
            text = _cut(text, MAX_QUERY_BYTES)
        length = len(text.encode("utf-8"))
        if size + 1 + length > MAX_QUERY_BYTES:
            break
        taken.append(text)
        size += 1 + length
    return " ".join(taken)


def _cut(text: str, limit: int) -> str:
    """The longest start of ``text`` of at most ``limit`` UTF-8 bytes."""
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


# Unicode's White_Space characters: where the core splits a query into words (Rust's
# ``char::is_whitespace``; Python's ``str.split()`` also splits at U+001C to U+001F).
_WHITE_SPACE = re.compile(
    "[\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+"
)


def query_words(query: str) -> List[str]:
    """The distinct words of a query, folded, split as the core splits them (a query of any
    number of words: the datastore narrows by the first ones and ``text_matches`` checks them
    all); ``[]`` for a query of only white space, which then
    restricts nothing. A query of any length works: the core sees ``narrowing_of``'s part."""
    folded = fold_case(query) if QUERY_IGNORE_CASE else query
    return list(dict.fromkeys(word for word in _WHITE_SPACE.split(folded) if word))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def text_matches(value: Any, words: List[str]) -> bool:
    """Whether every (folded) word occurs in a string field of the value, folded alike."""
    texts = [fold_case(text) for text in _strings(value)]
    return all(any(word in text for text in texts) for word in words)


_MISSING = object()


def filter_matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    return all(_field_matches(value.get(field, _MISSING), wanted) for field, wanted in filter.items())


def _field_matches(have: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict) and wanted and all(isinstance(k, str) and k.startswith("$") for k in wanted):
        return all(_operator(have, op, operand) for op, operand in wanted.items())
    return have is not _MISSING and _equal(have, wanted)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _equal(have: Any, wanted: Any) -> bool:
    if _is_number(have) and _is_number(wanted):
        return have == wanted
    if isinstance(have, bool) or isinstance(wanted, bool):
        return type(have) is type(wanted) and have == wanted
    if isinstance(wanted, dict):
        return isinstance(have, dict) and all(
            _field_matches(have.get(k, _MISSING), v) for k, v in wanted.items()
        )
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(have, list)
            and len(have) == len(wanted)
            and all(_equal(h, w) for h, w in zip(have, wanted))
        )
    return type(have) is type(wanted) and have == wanted


def _operator(have: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return have is not _MISSING and _equal(have, operand)
    if op == "$ne":
        return have is _MISSING or not _equal(have, operand)
    if op not in ("$gt", "$gte", "$lt", "$lte"):
        raise ValueError(f"unsupported filter operator: {op}")
    # Numbers compare as numbers, strings as strings; anything else, or a mix, never matches.
    if _is_number(have) and _is_number(operand):
        pass
    elif not (isinstance(have, str) and isinstance(operand, str)):
        return False
    if op == "$gt":
        return have > operand
    if op == "$gte":
        return have >= operand
    if op == "$lt":
        return have < operand
    return have <= operand
