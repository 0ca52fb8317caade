"""Google ADK's ``BaseMemoryService`` over any store of this package: ``AgentMemoryService``.

    from google.adk.runners import Runner
    from agent_memory import SqliteMemoryStore
    from agent_memory.adk import AgentMemoryService

    memory = AgentMemoryService(SqliteMemoryStore("memories.db"))
    runner = Runner(agent=agent, app_name="my-app", session_service=sessions, memory_service=memory)

**Scope.** Straight from ADK: ``app_name`` is the application, ``user_id`` the end user, and
every record lives in one namespace (``"adk"`` unless told otherwise). The model never names
a scope: ADK's ``load_memory`` / ``preload_memory`` tools pass the session's own.

**Ingestion.** ``add_session_to_memory(session)`` stores each event that has text as one
record whose key is ``<session id>/<event id>`` and whose content is the event's text (its
text parts joined by newlines; other parts are not kept); author, role and time go in the
record's metadata. Writes are create-only, so adding a session again (ADK adds it as it grows)
changes nothing and adds no duplicate (the events already stored are found with one listing,
not one write each). ``add_events_to_memory`` does the same for a delta;
``add_memory`` stores explicit ``MemoryEntry`` items as given, under ``memory/<id>``.

**Search.** ``search_memory`` matches as ADK's own ``InMemoryMemoryService`` does: the
query's words (its ``\w+`` runs, so punctuation never sticks to a word), any of them, ignoring
case, and the entries sharing the most words with the query first. An ASCII word matches a
whole word of the text (``dog`` never finds ``dogma``; a word inside a run of another script
counts, as ``Python`` in ``私はPythonを使う``), any other word anywhere in it. Case is
ignored by Unicode simple case folding, where ADK lowercases (so ``ß`` never matches ``ss``
here either), and the text is not normalized to NFC. The core's ``any_word`` search, ignoring
case, finds the candidates in the datastore (literal substrings: a superset), and each is then
checked and ranked here. It returns the best ``limit`` (10) entries, those sharing more words
before those sharing fewer and, among equals, the newest, in time order (oldest first). A
query of any length works (the core's search takes at most ``MAX_QUERY_WORDS`` words per
call: a longer query is searched in groups). A call never reads more than ``max_scan``
candidates (``ScanLimitError`` past it).

**Erasure.** ``delete_memory`` removes one entry by the id a search returned; ``erase(app_name,
user_id)`` physically removes everything the user has in that application, every namespace:
the delete ADK's own services lack.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
import uuid
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Set

from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from ._errors import MemoryConflictError
from ._native import (
    MAX_PAGE_LIMIT,
    MAX_QUERY_BYTES,
    MAX_QUERY_WORDS,
    MemoryRecord,
    MemoryScope,
    MemorySource,
    fold_case,
)
from ._protocol import MemoryStore
from ._scan import DEFAULT_MAX_SCAN, ScanLimitError

if TYPE_CHECKING:
    from google.adk.events.event import Event
    from google.adk.sessions.session import Session

__all__ = ["AgentMemoryService", "ScanLimitError"]

# How the service matches a query: any of its words, ignoring case, as ADK's in-memory
# service does; entries sharing more words with the query rank first.
QUERY_MATCH = "any_word"
QUERY_IGNORE_CASE = True
# What a word of a query is, as ADK's in-memory service reads one.
_WORD = re.compile(r"\w+")


class AgentMemoryService(BaseMemoryService):
    """ADK's memory service over ``store`` (any store of the package, started or not; the
    service starts it on first use, ``close()`` closes it)."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        namespace: str = "adk",
        limit: int = 10,
        max_scan: int = DEFAULT_MAX_SCAN,
    ) -> None:
        if limit < 1 or max_scan < 1:
            raise ValueError("limit and max_scan must be positive")
        MemoryScope("check", "check", namespace)  # the core's rules, at construction
        self._store = store
        self._namespace = namespace
        self._limit = limit
        self._max_scan = max_scan
        self._started = False

    async def _scope(self, app_name: str, user_id: str) -> MemoryScope:
        scope = MemoryScope(app_name, user_id, self._namespace)
        if not self._started:
            await self._store.start()
            self._started = True
        return scope

    async def close(self) -> None:
        """Close the underlying store."""
        if self._started:
            self._started = False
            await self._store.close()

    async def __aenter__(self) -> "AgentMemoryService":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- ingestion -----------------------------------------------------------------------------

    async def add_session_to_memory(self, session: "Session") -> None:
        """Store each event of the session that has text, once (see the module docs)."""
        await self._add_events(session.app_name, session.user_id, session.id, session.events, None)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence["Event"],
        session_id: Optional[str] = None,
        custom_metadata: Optional[Mapping[str, object]] = None,
    ) -> None:
        """Store the events that have text, once each; keyed by ``session_id`` (or
        ``events``) and the event id."""
        await self._add_events(app_name, user_id, session_id or "events", events, custom_metadata)

    async def _add_events(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        events: Sequence["Event"],
        custom_metadata: Optional[Mapping[str, object]],
    ) -> None:
        scope = await self._scope(app_name, user_id)
        # ADK adds a growing session again after each turn: one listing of what is stored
        # (a page per 100 events) spares a write attempt per event already kept.
        stored = set()
        after: Optional[str] = None
        while True:
            page = await self._store.list(scope, MAX_PAGE_LIMIT, after, f"{session_id}/")
            stored.update(record.key for record in page.items)
            after = page.next_cursor
            if after is None:
                break
        for event in events:
            text = _text(event.content)
            if not text or not event.id or f"{session_id}/{event.id}" in stored:
                continue
            metadata: Dict[str, Any] = {
                "author": event.author or None,
                "role": event.content.role if event.content else None,
                "timestamp": event.timestamp,
                "session_id": session_id,
            }
            if custom_metadata:
                metadata["custom_metadata"] = dict(custom_metadata)
            try:
                await self._store.put(
                    scope,
                    f"{session_id}/{event.id}",
                    text,
                    metadata=metadata,
                    create_only=True,
                    source=MemorySource(session_id=session_id, agent=event.author or None),
                )
            except MemoryConflictError:
                pass  # already stored: adding a session again changes nothing

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Optional[Mapping[str, object]] = None,
    ) -> None:
        """Store explicit entries as given: under ``memory/<entry.id>`` (a new id when it has
        none), replacing an entry of the same id."""
        scope = await self._scope(app_name, user_id)
        for entry in memories:
            text = _text(entry.content)
            if not text:
                continue
            metadata: Dict[str, Any] = {
                "author": entry.author,
                "role": entry.content.role,
                "timestamp": entry.timestamp,
            }
            extra = {**(custom_metadata or {}), **entry.custom_metadata}
            if extra:
                metadata["custom_metadata"] = extra
            await self._store.put(
                scope, f"memory/{entry.id or uuid.uuid4()}", text, metadata=metadata
            )

    # --- search and erasure ----------------------------------------------------------------

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """The user's entries sharing words with ``query`` (any word, ignoring case): the
        ``limit`` sharing the most (the newest among equals), oldest first."""
        scope = await self._scope(app_name, user_id)
        words = list(dict.fromkeys(fold_case(word) for word in _WORD.findall(query)))
        if not words:
            return SearchMemoryResponse()
        found: Dict[str, MemoryRecord] = {}
        read = 0
        for group in _groups(words):
            after: Optional[str] = None
            while True:
                page = await self._store.search(
                    scope,
                    group,
                    MAX_PAGE_LIMIT,
                    after,
                    match=QUERY_MATCH,
                    ignore_case=QUERY_IGNORE_CASE,
                )
                read += len(page.items)
                if read > self._max_scan:
                    raise ScanLimitError(
                        f"the query matches more than max_scan={self._max_scan} memories: use "
                        "fewer or rarer words, or raise max_scan"
                    )
                found.update((record.key, record) for record in page.items)
                after = page.next_cursor
                if after is None:
                    break
        shared = {key: _shared_words(record, words) for key, record in found.items()}
        # A candidate whose words only hold a query word (or the cut start of a very long
        # one) shares none.
        matched = [record for record in found.values() if shared[record.key]]
        best = sorted(matched, key=lambda r: (shared[r.key], _when(r)), reverse=True)
        chosen = sorted(best[: self._limit], key=_when)
        return SearchMemoryResponse(memories=[_entry(record) for record in chosen])

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: Optional[str] = None
    ) -> None:
        """Remove the entry with the id ``search_memory`` returned."""
        if not memory_id:
            raise ValueError("delete_memory needs the memory_id a search returned")
        scope = await self._scope(app_name, user_id)
        await self._store.delete(scope, memory_id)

    async def erase(self, app_name: str, user_id: str) -> int:
        """Physically remove everything ``user_id`` has in ``app_name`` (every namespace, not
        only this service's); the number of records removed."""
        await self._scope(app_name, user_id)
        return await self._store.delete_user(app_name, user_id)


def _text(content: Optional[types.Content]) -> str:
    if content is None or not content.parts:
        return ""
    return "\n".join(part.text for part in content.parts if part.text)


def _groups(words: List[str]) -> Iterator[str]:
    """The words as queries the core takes: at most ``MAX_QUERY_WORDS`` words and
    ``MAX_QUERY_BYTES`` bytes each (a longer word is looked for by its start, and confirmed
    whole by ``_shared_words``)."""
    group: List[str] = []
    size = 0  # of " ".join(group), in bytes
    for word in words:
        word = word.encode("utf-8")[:MAX_QUERY_BYTES].decode("utf-8", errors="ignore")
        length = len(word.encode("utf-8"))
        if group and (len(group) == MAX_QUERY_WORDS or size + 1 + length > MAX_QUERY_BYTES):
            yield " ".join(group)
            group, size = [], 0
        size += length + (1 if group else 0)
        group.append(word)
    if group:
        yield " ".join(group)


def _shared_words(record: MemoryRecord, words: List[str]) -> int:
    """How many of the (folded) query words the record's text holds, folded alike: an ASCII
    word as a whole word, any other anywhere (ADK's in-memory rule)."""
    text = fold_case(record.content)
    tokens = _words_of(text)
    return sum(1 for word in words if (word in tokens if word.isascii() else word in text))


def _words_of(text: str) -> Set[str]:
    """The words of a text, as ADK's in-memory service reads them: its ``\w+`` runs and,
    within a run mixing Latin and other scripts, each single-script part."""
    words = set(_WORD.findall(text))
    for word in [word for word in words if not word.isascii()]:
        words.update("".join(part) for _, part in itertools.groupby(word, _is_latin))
    return words


def _is_latin(c: str) -> bool:
    if c.isascii():
        return c.isalnum() or c == "_"
    return unicodedata.name(c, "").startswith("LATIN")


def _when(record: MemoryRecord) -> float:
    timestamp = record.metadata.get("timestamp")
    if isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool):
        return float(timestamp)
    return record.created_at


def _entry(record: MemoryRecord) -> MemoryEntry:
    metadata = record.metadata
    timestamp = metadata.get("timestamp")
    if isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool):
        timestamp = datetime.fromtimestamp(timestamp, tz=timezone.utc).isoformat()
    elif not isinstance(timestamp, str):
        timestamp = datetime.fromtimestamp(record.created_at, tz=timezone.utc).isoformat()
    return MemoryEntry(
        id=record.key,
        content=types.Content(role=metadata.get("role"), parts=[types.Part(text=record.content)]),
        author=metadata.get("author"),
        timestamp=timestamp,
        custom_metadata=metadata.get("custom_metadata") or {},
    )
