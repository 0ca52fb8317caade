"""The package's stores, the scoped handle and the fact port.

Each store class holds one ``_native.NativeStore`` (a provider of the Rust core) and forwards
every call to it; the methods here are ``async def`` so they are real coroutines (usable with
``asyncio.create_task``, recognised by ``inspect.iscoroutinefunction``). All checking, every
limit and every rule is the core's.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Tuple, Union

from . import _native
from ._native import (
    ApplicationPage,
    KeyInfoPage,
    Fact,
    ManualClock,
    MemoryCleanupPage,
    MemoryPage,
    MemoryRecord,
    MemoryScope,
    MemorySource,
    NamespacePage,
    UserPage,
)
from ._protocol import MatchMode, MemoryStore, MetadataFilter, SourceLike

__all__ = [
    "InMemoryStore",
    "SqliteMemoryStore",
    "PostgresMemoryStore",
    "RedisMemoryStore",
    "ScopedMemory",
    "Facts",
    "open_store",
]


class _NativeStore:
    """What the four stores share: every ``MemoryStore`` method, forwarded to the core."""

    __slots__ = ("_native",)
    _native: _native.NativeStore

    async def start(self) -> None:
        """Open what the store owns (connections, files) and create or check its schema.

        Idempotent. Every other operation raises ``MemoryStorageError`` before it.
        """
        await self._native.start()

    async def close(self) -> None:
        """Release what the store owns. Idempotent. ``InMemoryStore`` keeps its records."""
        await self._native.close()

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def put(
        self,
        scope: MemoryScope,
        key: str,
        content: str,
        *,
        metadata: Optional[Mapping[str, Any]] = None,
        expires_at: Optional[float] = None,
        expected_revision: Optional[str] = None,
        create_only: bool = False,
        source: Optional[SourceLike] = None,
    ) -> MemoryRecord:
        """Insert or replace ``key`` atomically; see ``MemoryStore.put``."""
        return await self._native.put(
            scope, key, content, metadata, expires_at, expected_revision, create_only, source
        )

    async def get(self, scope: MemoryScope, key: str) -> Optional[MemoryRecord]:
        """The live record at ``key``, or ``None``."""
        return await self._native.get(scope, key)

    async def list(
        self,
        scope: MemoryScope,
        limit: int = 20,
        after: Optional[str] = None,
        prefix: str = "",
        *,
        metadata: Optional[MetadataFilter] = None,
    ) -> MemoryPage:
        """Live records in ascending key order, only keys starting with ``prefix`` and only
        records whose metadata passes ``metadata`` when given; see ``MemoryStore.list``."""
        return await self._native.list(scope, limit, after, prefix, metadata=metadata)

    async def list_keys(
        self,
        scope: MemoryScope,
        limit: int = 20,
        after: Optional[str] = None,
        prefix: str = "",
    ) -> KeyInfoPage:
        """Live keys with their content's size in bytes, without reading contents; see
        ``MemoryStore.list_keys``."""
        return await self._native.list_keys(scope, limit, after, prefix)

    async def search(
        self,
        scope: MemoryScope,
        query: str,
        limit: int = 20,
        after: Optional[str] = None,
        *,
        match: MatchMode = "phrase",
        ignore_case: bool = False,
        metadata: Optional[MetadataFilter] = None,
    ) -> MemoryPage:
        """Literal content matches: the whole query (``match="phrase"``), every word of it
        (``"all_words"``) or any (``"any_word"``), case-sensitive unless ``ignore_case``; see
        ``MemoryStore.search``."""
        return await self._native.search(
            scope, query, limit, after, match=match, ignore_case=ignore_case, metadata=metadata
        )

    async def delete(
        self, scope: MemoryScope, key: str, expected_revision: Optional[str] = None
    ) -> bool:
        """Remove ``key``; whether a live record existed."""
        return await self._native.delete(scope, key, expected_revision)

    async def delete_all(self, scope: MemoryScope) -> int:
        """Erase one namespace of one user (trusted maintenance only)."""
        return await self._native.delete_all(scope)

    async def delete_user(self, application_id: str, user_id: str) -> int:
        """Erase every namespace of one application's user (trusted maintenance only)."""
        return await self._native.delete_user(application_id, user_id)

    async def list_namespaces(
        self, application_id: str, user_id: str, limit: int = 20, after: Optional[str] = None
    ) -> NamespacePage:
        """The user's namespaces that hold records, the default namespace first."""
        return await self._native.list_namespaces(application_id, user_id, limit, after)

    async def list_users(
        self, application_id: str, limit: int = 20, after: Optional[str] = None
    ) -> UserPage:
        """The application's user ids that hold records, in byte order (trusted maintenance
        only)."""
        return await self._native.list_users(application_id, limit, after)

    async def list_applications(
        self, limit: int = 20, after: Optional[str] = None
    ) -> ApplicationPage:
        """The store's application ids that hold records, in byte order (trusted maintenance
        only)."""
        return await self._native.list_applications(limit, after)

    async def purge_expired(
        self, scope: MemoryScope, limit: int = 100, after: Optional[str] = None
    ) -> MemoryCleanupPage:
        """Remove the expired records among the next ``limit`` keys of one namespace."""
        return await self._native.purge_expired(scope, limit, after)

    def scoped(self, scope: MemoryScope, *, source: Optional[SourceLike] = None) -> ScopedMemory:
        """This store bound to ``scope`` (and ``source``): the handle for agent code."""
        return ScopedMemory(self, scope, source=source)

    def __repr__(self) -> str:
        # Never the URL or the path: they can hold credentials and user names.
        return f"{type(self).__name__}(provider={self._native.provider!r})"


class InMemoryStore(_NativeStore):
    """Memories in this process only: for tests and single-process programs.

    ``clock`` (a ``agent_memory.testing.ManualClock``) replaces the system clock, so tests
    move time instead of sleeping. ``close()`` releases nothing: records stay readable.
    ``max_records_per_user`` and ``max_bytes_per_user`` (on every store class) limit what one
    application user holds; a write past them raises ``MemoryQuotaError``.
    """

    __slots__ = ()

    def __init__(
        self,
        *,
        clock: Optional[ManualClock] = None,
        max_records_per_user: Optional[int] = None,
        max_bytes_per_user: Optional[int] = None,
    ) -> None:
        self._native = _native.NativeStore.memory(clock, max_records_per_user, max_bytes_per_user)


class SqliteMemoryStore(_NativeStore):
    """Memories in a SQLite file: the embedded default, survives restarts.

    ``path=None`` is the file the CLI and the MCP server use
    (``~/.local/share/agent-memory/memories.db`` on Linux); ``start()`` creates it.
    """

    __slots__ = ()

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]", None] = None,
        *,
        clock: Optional[ManualClock] = None,
        max_records_per_user: Optional[int] = None,
        max_bytes_per_user: Optional[int] = None,
    ) -> None:
        self._native = _native.NativeStore.sqlite(
            path, clock, max_records_per_user, max_bytes_per_user
        )


class PostgresMemoryStore(_NativeStore):
    """Memories in PostgreSQL: shared and durable, for many replicas.

    ``pool_options`` sets the store's own connection pool: ``min_size`` (opened by
    ``start()``), ``max_size``, and ``connect_timeout`` / ``acquire_timeout`` in seconds.
    ``setup_schema=False`` only checks a table someone provisioned instead of creating it.
    """

    __slots__ = ()

    def __init__(
        self,
        url: str,
        pool_options: Optional[Mapping[str, Any]] = None,
        setup_schema: bool = True,
        *,
        max_records_per_user: Optional[int] = None,
        max_bytes_per_user: Optional[int] = None,
    ) -> None:
        options = None if pool_options is None else dict(pool_options)
        self._native = _native.NativeStore.postgres(
            url, options, setup_schema, max_records_per_user, max_bytes_per_user
        )


class RedisMemoryStore(_NativeStore):
    """Memories in Redis (``redis://``, ``rediss://``) or Redis Cluster
    (``redis+cluster://host:port,host:port``): low latency. Configure persistence and
    ``maxmemory-policy noeviction``; ``start()`` warns when the deployment is not durable.
    """

    __slots__ = ()

    def __init__(
        self,
        url: str,
        *,
        max_records_per_user: Optional[int] = None,
        max_bytes_per_user: Optional[int] = None,
    ) -> None:
        self._native = _native.NativeStore.redis(url, max_records_per_user, max_bytes_per_user)


_CLASSES = {
    "memory": InMemoryStore,
    "sqlite": SqliteMemoryStore,
    "postgres": PostgresMemoryStore,
    "redis": RedisMemoryStore,
}


def open_store(url: str) -> MemoryStore:
    """The unstarted store a URL names: ``memory:``, ``sqlite:PATH``, ``postgres://…``,
    ``redis://…`` or ``redis+cluster://…`` (the same URLs as the CLI's ``--store``)."""
    native = _native.NativeStore.open(url)
    # A provider without a class of its own here is served by the common base.
    cls = _CLASSES.get(native.provider, _NativeStore)
    store = cls.__new__(cls)
    store._native = native
    return store


def _core_target(store: MemoryStore) -> object:
    """The object the core calls for ``store``: the native store of the package's own classes
    (not of subclasses, which may override methods), else the store itself."""
    if type(store) is _NativeStore or type(store) in _CLASSES.values():
        return store._native  # type: ignore[attr-defined]
    return store


class ScopedMemory:
    """A store bound to one scope and one source: what agent code gets, as the seed's
    ``context.memory``. Only the everyday operations; maintenance stays on the store.

    A write without its own ``source`` records the handle's.
    """

    __slots__ = ("_native",)

    def __init__(
        self, store: MemoryStore, scope: MemoryScope, *, source: Optional[SourceLike] = None
    ) -> None:
        self._native = _native.NativeScoped(_core_target(store), scope, source)

    @property
    def scope(self) -> MemoryScope:
        """The bound scope."""
        return self._native.scope

    @property
    def source(self) -> MemorySource:
        """The bound source."""
        return self._native.source

    def namespace(self, name: str) -> ScopedMemory:
        """The same user and source in namespace ``name``."""
        handle = ScopedMemory.__new__(ScopedMemory)
        handle._native = self._native.namespace(name)
        return handle

    async def put(
        self,
        key: str,
        content: str,
        *,
        metadata: Optional[Mapping[str, Any]] = None,
        expires_at: Optional[float] = None,
        expected_revision: Optional[str] = None,
        create_only: bool = False,
        source: Optional[SourceLike] = None,
    ) -> MemoryRecord:
        """Insert or replace ``key``; see ``MemoryStore.put``."""
        return await self._native.put(
            key, content, metadata, expires_at, expected_revision, create_only, source
        )

    async def get(self, key: str) -> Optional[MemoryRecord]:
        """The live record at ``key``, or ``None``."""
        return await self._native.get(key)

    async def list(
        self,
        limit: int = 20,
        after: Optional[str] = None,
        prefix: str = "",
        *,
        metadata: Optional[MetadataFilter] = None,
    ) -> MemoryPage:
        """Live records in ascending key order, only keys starting with ``prefix`` and only
        records whose metadata passes ``metadata`` when given."""
        return await self._native.list(limit, after, prefix, metadata=metadata)

    async def search(
        self,
        query: str,
        limit: int = 20,
        after: Optional[str] = None,
        *,
        match: MatchMode = "phrase",
        ignore_case: bool = False,
        metadata: Optional[MetadataFilter] = None,
    ) -> MemoryPage:
        """Literal content matches (the phrase, all its words or any, case-sensitive unless
        ``ignore_case``); continue until ``next_cursor`` is None."""
        return await self._native.search(
            query, limit, after, match=match, ignore_case=ignore_case, metadata=metadata
        )

    async def delete(self, key: str, expected_revision: Optional[str] = None) -> bool:
        """Remove ``key``; whether a live record existed."""
        return await self._native.delete(key, expected_revision)

    def __repr__(self) -> str:
        return f"ScopedMemory(scope={self.scope!r})"


class Facts:
    """The fact port over any store: ``remember``, ``forget``, ``recall``, ``erase``.

    A fact's scope is the application (tenant) plus the end user, both required, built in one
    place; facts live in ``namespace`` ("facts" unless told otherwise, so they never mix with
    keyed memories of the same user).

    - ``remember`` always adds; it never merges or deduplicates.
    - ``forget`` returns ``False`` when the fact is gone or was never this user's.
    - ``recall`` returns the facts oldest first (at most 1,000 per call); ``limit`` truncates,
      it never selects.
    - ``erase`` physically deletes everything stored for the end user, in every namespace.
    """

    __slots__ = ("_native",)

    def __init__(
        self,
        store: MemoryStore,
        *,
        namespace: Optional[str] = "facts",
        source: Optional[SourceLike] = None,
    ) -> None:
        self._native = _native.NativeFacts(_core_target(store), namespace, source)

    async def remember(self, application_id: str, end_user_id: str, text: str) -> Fact:
        """Add a fact and return it."""
        return await self._native.remember(application_id, end_user_id, text)

    async def forget(self, application_id: str, end_user_id: str, fact_id: str) -> bool:
        """Delete a fact; ``False`` when it is already gone."""
        return await self._native.forget(application_id, end_user_id, fact_id)

    async def recall(
        self, application_id: str, end_user_id: str, limit: Optional[int] = None
    ) -> Tuple[Fact, ...]:
        """The oldest facts of the end user, oldest first: the first ``limit`` when given,
        at most 1,000 (one call never reads more than that)."""
        return await self._native.recall(application_id, end_user_id, limit)

    async def erase(self, application_id: str, end_user_id: str) -> int:
        """Physically delete everything stored for the end user; the number removed."""
        return await self._native.erase(application_id, end_user_id)
