"""A memory store written in pure Python, on the package's types and provider helpers.

It is what a third party would write (a dict guarded by the event loop instead of a
database), and the tests run the conformance mixin against it to show that a store written
in Python can pass. ``BrokenStore`` below breaks two rules on purpose, to show that the
mixin catches them.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

from agent_memory import (
    ApplicationPage,
    KeyInfo,
    KeyInfoPage,
    MemoryCleanupPage,
    MemoryConflictError,
    MemoryPage,
    MemoryRecord,
    MemoryScope,
    MemoryStorageError,
    NamespacePage,
    UserPage,
)
from agent_memory import provider

User = Tuple[str, str]
#: A search's ``match``, ``ignore_case`` and ``metadata`` (a listing's ``metadata``), only
#: those that differ from the defaults.
Options = Dict[str, Any]

#: Content bytes one search call inspects, as the core's providers do by default.
SEARCH_SCAN_BYTES = 1_048_576


class DictStore:
    """Every record in one process-local dict: user -> namespace -> key -> record.

    Python compares strings by code point, which is also their UTF-8 byte order, so
    ``sorted`` gives the contract's key order. No method awaits between its check and its
    write, so each operation is atomic on the event loop.
    """

    def __init__(self, clock=None) -> None:
        self._clock = clock
        self._started = False
        self._revisions = 0
        self._users: Dict[User, Dict[str, Dict[str, MemoryRecord]]] = {}

    # -- helpers -------------------------------------------------------------------------

    def _now(self) -> float:
        return self._clock.now() if self._clock is not None else time.time()

    def _ensure_started(self) -> None:
        if not self._started:
            raise MemoryStorageError("storage error (python): the store is not started")

    @staticmethod
    def _user(scope: MemoryScope) -> User:
        return (scope.application_id, scope.user_id)

    @staticmethod
    def _ns_name(scope: MemoryScope) -> str:
        return scope.namespace or ""

    def _keys(self, scope: MemoryScope) -> Dict[str, MemoryRecord]:
        return self._users.get(self._user(scope), {}).get(self._ns_name(scope), {})

    def _prune(self, user: User) -> None:
        namespaces = self._users.get(user)
        if namespaces is None:
            return
        for name in [name for name, keys in namespaces.items() if not keys]:
            del namespaces[name]
        if not namespaces:
            del self._users[user]

    @staticmethod
    def _live(record: MemoryRecord, now: float) -> bool:
        return record.expires_at is None or record.expires_at > now

    def _matches(self, record: MemoryRecord, words: List[str], options: Options) -> bool:
        """Whether the content holds every word (the phrase, ``all_words``) or one
        (``any_word``), as ``search_words`` returned them (folded when ignoring case)."""
        content = record.content
        if options.get("ignore_case"):
            content = provider.fold_case(content)
        if options.get("match") == "any_word":
            return any(word in content for word in words)
        return all(word in content for word in words)

    @staticmethod
    def _passes(record: MemoryRecord, options: Options) -> bool:
        """Whether the record's metadata holds every field of the filter with an equal value."""
        metadata = record.metadata
        return all(
            name in metadata and _same_value(metadata[name], wanted)
            for name, wanted in (options.get("metadata") or {}).items()
        )

    def _page(
        self,
        kind: str,
        scope: MemoryScope,
        limit: int,
        rows: List[MemoryRecord],
        prefix: str = "",
        options: Optional[Options] = None,
    ) -> MemoryPage:
        items = rows[:limit]
        more = len(rows) > limit
        cursor = (
            self._cursor(kind, scope, items[-1].key, prefix, options) if more and items else None
        )
        return MemoryPage(items, cursor)

    def _scan(
        self,
        kind: str,
        scope: MemoryScope,
        limit: int,
        start: Optional[str],
        prefix: str,
        options: Options,
        keep,
    ) -> MemoryPage:
        """A page of the live records after ``start`` that ``keep``: a search, or a filtered
        listing. A call inspects content bytes while under the budget (always one record at
        least), then returns with a cursor after the last key it inspected, as the contract
        asks."""
        now = self._now()
        keys = self._keys(scope)
        rows = []
        inspected = 0
        last = None
        for key in sorted(keys):
            if start is not None and key <= start or not key.startswith(prefix):
                continue
            if inspected >= SEARCH_SCAN_BYTES:
                return MemoryPage(rows[:limit], self._cursor(kind, scope, last, prefix, options))
            record = keys[key]
            inspected += len(record.content.encode())
            last = key
            if self._live(record, now) and keep(record):
                rows.append(record)
                if len(rows) > limit:
                    break
        return self._page(kind, scope, limit, rows, prefix, options)

    # -- cursors: the core's, through the helpers (a subclass may make its own) -----------

    def _start(
        self,
        kind: str,
        over,
        limit: int,
        after: Optional[str],
        prefix: str = "",
        options: Optional[Options] = None,
    ):
        """Checks a page request and returns the position to continue after, or ``None``.

        ``kind`` is ``list``, ``keys``, ``search`` or ``purge`` (``over`` a scope), ``namespaces``
        (``over`` an ``(application_id, user_id)`` pair), ``users`` (an application id) or
        ``applications`` (``None``). ``options`` are a search's ``match``, ``ignore_case`` and
        ``metadata`` (a listing's ``metadata``), which bind the cursor."""
        if kind == "namespaces":
            return provider.namespace_page(*over, limit, after)
        if kind == "users":
            return provider.user_page(over, limit, after)
        if kind == "applications":
            return provider.application_page(limit, after)
        return provider.key_page(kind, over, limit, after, prefix, **(options or {}))

    def _cursor(
        self, kind: str, over, position: str, prefix: str = "", options: Optional[Options] = None
    ) -> str:
        """The cursor continuing a page of ``kind`` (as for ``_start``) after ``position``."""
        if kind == "namespaces":
            return provider.namespace_cursor(*over, position)
        if kind == "users":
            return provider.user_cursor(over, position)
        if kind == "applications":
            return provider.application_cursor(position)
        return provider.key_cursor(kind, over, position, prefix, **(options or {}))

    # -- the protocol --------------------------------------------------------------------

    async def start(self) -> None:
        self._started = True

    async def close(self) -> None:
        pass

    async def put(
        self,
        scope,
        key,
        content,
        *,
        metadata=None,
        expires_at=None,
        expected_revision=None,
        create_only=False,
        source=None,
    ):
        now = self._now()
        provider.check_put(
            key,
            content,
            metadata=metadata,
            expires_at=expires_at,
            expected_revision=expected_revision,
            create_only=create_only,
            source=source,
            now=now,
        )
        self._ensure_started()
        keys = self._users.setdefault(self._user(scope), {}).setdefault(self._ns_name(scope), {})
        current = keys.get(key)
        live = current if current is not None and self._live(current, now) else None
        if create_only and live is not None:
            self._prune(self._user(scope))
            raise MemoryConflictError("conflict: a live record already has this key")
        if expected_revision is not None and (live is None or live.revision != expected_revision):
            self._prune(self._user(scope))
            raise MemoryConflictError("conflict: the expected revision is not the live record's")
        self._revisions += 1
        record = MemoryRecord(
            scope,
            key,
            content,
            metadata or {},
            format(self._revisions, "x"),
            live.created_at if live is not None else now,
            now,
            expires_at,
            source,
        )
        keys[key] = record
        return record

    async def get(self, scope, key):
        provider.check_key(key)
        self._ensure_started()
        record = self._keys(scope).get(key)
        return record if record is not None and self._live(record, self._now()) else None

    async def list(self, scope, limit=20, after=None, prefix="", *, metadata=None):
        options: Options = {"metadata": metadata} if metadata else {}
        start = self._start("list", scope, limit, after, prefix, options)
        self._ensure_started()
        if options:
            keep = lambda record: self._passes(record, options)  # noqa: E731
            return self._scan("list", scope, limit, start, prefix, options, keep)
        return self._page("list", scope, limit, self._live_after(scope, start, prefix, limit), prefix)

    def _live_after(
        self, scope: MemoryScope, start: Optional[str], prefix: str, limit: int
    ) -> List[MemoryRecord]:
        """The live records after ``start`` whose keys start with ``prefix``, in key order: at
        most ``limit`` and one more, which tells that a page follows."""
        now = self._now()
        keys = self._keys(scope)
        rows = []
        for key in sorted(keys):
            # Python orders strings by code point, which is the UTF-8 byte order of keys.
            if start is not None and key <= start or not key.startswith(prefix):
                continue
            if self._live(keys[key], now):
                rows.append(keys[key])
                if len(rows) > limit:
                    break
        return rows

    async def list_keys(self, scope, limit=20, after=None, prefix=""):
        start = self._start("keys", scope, limit, after, prefix)
        self._ensure_started()
        rows = [
            KeyInfo(record.key, len(record.content.encode("utf-8")))
            for record in self._live_after(scope, start, prefix, limit)
        ]
        more = len(rows) > limit
        rows = rows[:limit]
        cursor = self._cursor("keys", scope, rows[-1].key, prefix) if more and rows else None
        return KeyInfoPage(rows, cursor)

    async def search(
        self,
        scope,
        query,
        limit=20,
        after=None,
        *,
        match="phrase",
        ignore_case=False,
        metadata=None,
    ):
        options: Options = {}
        if match != "phrase":
            options["match"] = match
        if ignore_case:
            options["ignore_case"] = True
        if metadata:
            options["metadata"] = metadata
        words = provider.search_words(query, **{k: v for k, v in options.items() if k != "metadata"})
        start = self._start("search", scope, limit, after, "", options)
        self._ensure_started()
        keep = lambda record: self._matches(record, words, options) and self._passes(record, options)  # noqa: E731
        return self._scan("search", scope, limit, start, "", options, keep)

    async def delete(self, scope, key, expected_revision=None):
        provider.check_key(key)
        self._ensure_started()
        keys = self._keys(scope)
        current = keys.get(key)
        live = current if current is not None and self._live(current, self._now()) else None
        if expected_revision is not None and (live is None or live.revision != expected_revision):
            raise MemoryConflictError("conflict: the expected revision is not the live record's")
        keys.pop(key, None)
        self._prune(self._user(scope))
        return live is not None

    async def delete_all(self, scope):
        self._ensure_started()
        namespaces = self._users.get(self._user(scope), {})
        removed = len(namespaces.pop(self._ns_name(scope), {}))
        self._prune(self._user(scope))
        return removed

    async def delete_user(self, application_id, user_id):
        provider.check_user(application_id, user_id)
        self._ensure_started()
        namespaces = self._users.pop((application_id, user_id), {})
        return sum(len(keys) for keys in namespaces.values())

    async def list_namespaces(self, application_id, user_id, limit=20, after=None):
        start = self._start("namespaces", (application_id, user_id), limit, after)
        self._ensure_started()
        names = sorted(
            name
            for name, keys in self._users.get((application_id, user_id), {}).items()
            if keys and (start is None or name > start)
        )
        page = names[:limit]
        items = [MemoryScope(application_id, user_id, name or None) for name in page]
        more = len(names) > limit
        cursor = self._cursor("namespaces", (application_id, user_id), page[-1]) if more else None
        return NamespacePage(items, cursor)

    async def list_users(self, application_id, limit=20, after=None):
        start = self._start("users", application_id, limit, after)
        self._ensure_started()
        ids = sorted(
            user
            for (app, user), namespaces in self._users.items()
            if app == application_id
            and any(namespaces.values())
            and (start is None or user > start)
        )
        page = ids[:limit]
        cursor = self._cursor("users", application_id, page[-1]) if len(ids) > limit else None
        return UserPage(page, cursor)

    async def list_applications(self, limit=20, after=None):
        start = self._start("applications", None, limit, after)
        self._ensure_started()
        ids = sorted(
            {
                app
                for (app, _user), namespaces in self._users.items()
                if any(namespaces.values()) and (start is None or app > start)
            }
        )
        page = ids[:limit]
        cursor = self._cursor("applications", None, page[-1]) if len(ids) > limit else None
        return ApplicationPage(page, cursor)

    async def purge_expired(self, scope, limit=100, after=None):
        start = self._start("purge", scope, limit, after)
        self._ensure_started()
        now = self._now()
        keys = self._keys(scope)
        following = [key for key in sorted(keys) if start is None or key > start]
        batch = following[:limit]
        deleted = 0
        for key in batch:
            if not self._live(keys[key], now):
                del keys[key]
                deleted += 1
        self._prune(self._user(scope))
        cursor = self._cursor("purge", scope, batch[-1]) if len(following) > limit else None
        return MemoryCleanupPage(deleted, cursor)


def _same_value(found: Any, wanted: Any) -> bool:
    """A filter's equality: numbers by value (``1`` equals ``1.0``, which Python's ``==``
    compares exactly), a boolean only with a boolean (``True == 1`` in Python, not here), and
    strings and ``None`` exactly."""
    if isinstance(found, bool) or isinstance(wanted, bool):
        return isinstance(found, bool) and isinstance(wanted, bool) and found == wanted
    if isinstance(wanted, (int, float)):
        return isinstance(found, (int, float)) and found == wanted
    if wanted is None:
        return found is None
    return isinstance(found, str) and found == wanted


class BrokenStore(DictStore):
    """``DictStore`` with two bugs a real store could have: namespaces share one bucket, and
    search ignores case."""

    @staticmethod
    def _ns_name(scope: MemoryScope) -> str:
        return ""

    def _matches(self, record: MemoryRecord, words: List[str], options: Options) -> bool:
        return all(word.lower() in record.content.lower() for word in words)
