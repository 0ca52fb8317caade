"""The package's stores, the scoped handle and the fact port.

Each store class holds one ``_native.NativeStore`` (a provider of the Rust core) and forwards
every call to it, a call on one scope through a ``_native.NativeScoped`` handle bound to the
scope, as ``ScopedMemory`` forwards to its own. The forwarding methods are made from the
``MemoryStore`` protocol's, so signatures and documentation are written once, there; they are
``async def`` so they are real coroutines (usable with ``asyncio.create_task``, recognised by
``inspect.iscoroutinefunction``). All checking, every limit and every rule is the core's.
"""

from __future__ import annotations

import functools
import inspect
import os
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Optional, Tuple, TypeVar, Union

from . import _native
from ._native import Fact, ManualClock, MemoryScope, MemorySource
from ._protocol import MemoryStore, SourceLike

if TYPE_CHECKING:
    from typing_extensions import Concatenate, ParamSpec

    _P = ParamSpec("_P")

__all__ = [
    "InMemoryStore",
    "SqliteMemoryStore",
    "PostgresMemoryStore",
    "RedisMemoryStore",
    "ScopedMemory",
    "Facts",
    "open_store",
]


_Method = TypeVar("_Method", bound=Callable[..., Any])
_R = TypeVar("_R")


def _native_call(name: str) -> Callable[..., Awaitable[Any]]:
    """A coroutine function calling ``self._native``'s method ``name`` with the arguments as
    given: the native methods take the Python methods' arguments, under the same names."""

    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self._native, name)(*args, **kwargs)

    return call


def _forwarded(spec: _Method) -> _Method:
    """A store's ``MemoryStore`` method ``spec``, run by its native store: the protocol's
    signature and documentation (for ``help()`` and ``inspect.signature``) and type."""
    return functools.wraps(spec)(_native_call(spec.__name__))  # type: ignore[return-value]


def _on_scope(spec: _Method) -> _Method:
    """Like ``_forwarded``, for a method on one scope: run by a ``NativeScoped`` handle bound to
    the scope (with no source of its own), so the store and ``ScopedMemory`` share one
    implementation of each call."""
    name = spec.__name__

    async def call(self: _NativeStore, scope: MemoryScope, *args: Any, **kwargs: Any) -> Any:
        handle = _native.NativeScoped(self._native, scope)
        return await getattr(handle, name)(*args, **kwargs)

    return functools.wraps(spec)(call)  # type: ignore[return-value]


def _scoped(
    spec: Callable[Concatenate[Any, MemoryScope, _P], _R], doc: str
) -> Callable[Concatenate[ScopedMemory, _P], _R]:
    """``ScopedMemory``'s form of the ``MemoryStore`` method ``spec``: its signature without
    the ``scope`` (the handle's), documented by ``doc``, run by the native handle."""
    method = _native_call(spec.__name__)
    signature = inspect.signature(spec)
    parameters = [p for p in signature.parameters.values() if p.name != "scope"]
    method.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    method.__name__ = spec.__name__
    method.__qualname__ = f"ScopedMemory.{spec.__name__}"
    method.__doc__ = doc
    return method  # type: ignore[return-value]


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

    put = _on_scope(MemoryStore.put)
    get = _on_scope(MemoryStore.get)
    list = _on_scope(MemoryStore.list)
    list_keys = _on_scope(MemoryStore.list_keys)
    search = _on_scope(MemoryStore.search)
    delete = _on_scope(MemoryStore.delete)
    delete_all = _forwarded(MemoryStore.delete_all)
    delete_user = _forwarded(MemoryStore.delete_user)
    list_namespaces = _forwarded(MemoryStore.list_namespaces)
    list_users = _forwarded(MemoryStore.list_users)
    list_applications = _forwarded(MemoryStore.list_applications)
    purge_expired = _forwarded(MemoryStore.purge_expired)

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

    put = _scoped(MemoryStore.put, """Insert or replace ``key``; see ``MemoryStore.put``.""")
    get = _scoped(MemoryStore.get, """The live record at ``key``, or ``None``.""")
    list = _scoped(
        MemoryStore.list,
        """Live records in ascending key order, only keys starting with ``prefix`` and only
        records whose metadata passes ``metadata`` when given.""",
    )
    search = _scoped(
        MemoryStore.search,
        """Literal content matches (the phrase, all its words or any, case-sensitive unless
        ``ignore_case``); continue until ``next_cursor`` is None.""",
    )
    delete = _scoped(MemoryStore.delete, """Remove ``key``; whether a live record existed.""")

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
        return await self._native.user(application_id, end_user_id).remember(text)

    async def forget(self, application_id: str, end_user_id: str, fact_id: str) -> bool:
        """Delete a fact; ``False`` when it is already gone."""
        return await self._native.user(application_id, end_user_id).forget(fact_id)

    async def recall(
        self, application_id: str, end_user_id: str, limit: Optional[int] = None
    ) -> Tuple[Fact, ...]:
        """The oldest facts of the end user, oldest first: the first ``limit`` when given,
        at most 1,000 (one call never reads more than that)."""
        return await self._native.user(application_id, end_user_id).recall(limit)

    async def erase(self, application_id: str, end_user_id: str) -> int:
        """Physically delete everything stored for the end user; the number removed."""
        return await self._native.user(application_id, end_user_id).erase()
