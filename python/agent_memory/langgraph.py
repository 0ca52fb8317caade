"""LangGraph's ``BaseStore`` over any store of this package: ``AgentMemoryStore``.

    from langgraph.graph import StateGraph
    from agent_memory import SqliteMemoryStore
    from agent_memory.langgraph import AgentMemoryStore

    store = AgentMemoryStore(SqliteMemoryStore("memories.db"), application_id="my-app", user_at=1)
    graph = builder.compile(store=store)   # ("memories", "{langgraph_user_id}") namespaces

**Mapping.** Every LangGraph namespace tuple holds the end user's id at position ``user_at``;
the other labels, in order, joined with ``.`` are this package's namespace (no other label:
the default namespace). LangGraph forbids ``.`` in a label, so the mapping is reversible. The
key is the record's key; the value (a JSON object) is the record's content, as compact JSON
of at most 64 KiB; the item's ``created_at`` / ``updated_at`` are the record's.

**Isolation.** With ``user_id=`` the adapter serves that one user: an operation naming
another user at ``user_at`` is refused before any I/O (a batch is checked whole first), and
listings never see another user; ``for_user(user_id)`` makes such a view of an adapter. Without it (trusted code), a search or listing whose prefix
stops before the user position walks the application's users, in byte order.

**Search.** ``query`` matches an item when every word of it (split on Unicode white space)
occurs in the value's string fields (every string in the value, at any depth; the words may be
in different fields), ignoring case by Unicode simple case folding: literal words, no
stemming, no similarity. A query of only white space restricts nothing, like an empty one; a
query of any length works. There are no embeddings, so ``index=`` is refused at construction
and ``SearchItem.score`` is ``None``. ``filter`` matches value fields exactly or with ``$eq``,
``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte`` (numbers as numbers, strings as strings, a
number never equals a string). The value is the record's content, not its metadata, so
``filter`` is checked here on each candidate rather than as the core's metadata filter (which
only sees metadata); the datastore narrows the candidates first, by the query's words and by
the filter's top-level equalities on strings, booleans and null, as they read in the value's
JSON text. Results come in
order: users in byte order, then namespaces by their labels, then keys, paged with ``limit``
/ ``offset``. No call reads more than ``max_scan`` records (or namespaces) to answer; past
it, ``ScanLimitError`` says what to narrow, never a short answer.

**TTL.** ``ttl`` (minutes, or a ``TTLConfig``) becomes each record's expiry; expired items are
invisible at once. With ``refresh_on_read`` a read moves the expiry with a revision-checked
write, so it never overwrites a concurrent update. ``sweep_ttl()`` / ``start_ttl_sweeper()``
only reclaim space.

**Beyond LangGraph.** Items carry ``.revision``; ``put(..., expected_revision=…)`` and
``put(..., create_only=True)`` raise ``MemoryConflictError`` on a stale revision or an
existing item; ``erase_user``, ``delete_namespace`` and ``sweep_ttl`` (with ``a…`` forms) are
trusted maintenance.

The sync methods work from any thread, with or without an event loop: they run on a private
event loop thread that the adapter owns and ``close()`` stops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import math
import re
import threading
import time
import weakref
from datetime import datetime, timezone
from typing import (
    Any,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Literal,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from ._errors import MemoryConflictError, MemoryValidationError
from ._native import (
    MAX_CONTENT_BYTES,
    MAX_PAGE_LIMIT,
    MAX_QUERY_BYTES,
    MAX_QUERY_WORDS,
    MemoryRecord,
    MemoryScope,
    fold_case,
)
from ._protocol import MemoryStore
from ._scan import DEFAULT_MAX_SCAN, ScanLimitError

__all__ = [
    "AgentMemoryItem",
    "AgentMemorySearchItem",
    "AgentMemoryStore",
    "DEFAULT_MAX_SCAN",
    "ScanLimitError",
]

# How the adapter matches ``query``: every word, ignoring case, in the value's string fields.
# The core's search with these options narrows the candidates (see ``_narrowing``), and
# ``_text_matches`` confirms each against the string fields alone.
QUERY_MATCH = "all_words"
QUERY_IGNORE_CASE = True

_T = TypeVar("_T")
_PAGE = MAX_PAGE_LIMIT
# Where the adapter keeps an item's TTL (minutes) in the record's metadata, for refreshes.
_TTL_FIELD = "langgraph_ttl_minutes"
# How many namespaces' scopes the adapter keeps built.
_SCOPE_CACHE = 1024


class AgentMemoryItem(Item):
    """LangGraph's ``Item`` plus the record's ``revision`` (for ``expected_revision=``)."""

    __slots__ = ("revision",)

    def __init__(self, *, revision: str, **fields: Any) -> None:
        super().__init__(**fields)
        self.revision = revision


class AgentMemorySearchItem(SearchItem):
    """LangGraph's ``SearchItem`` (``score`` is always ``None``) plus ``revision``."""

    __slots__ = ("revision",)

    def __init__(self, *, revision: str, **fields: Any) -> None:
        super().__init__(**fields)
        self.revision = revision


class _ConditionalPut(NamedTuple):
    """A ``PutOp`` with the compare-and-set conditions LangGraph has no field for."""

    op: PutOp
    expected_revision: Optional[str]
    create_only: bool


class _LoopThread:
    """A private event loop on a daemon thread: where the sync methods run coroutines (the
    native futures need a running loop in the calling thread, which a worker thread lacks)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None

    def run(self, coroutine: Awaitable[_T]) -> _T:
        loop = self._start()
        if threading.current_thread() is self._thread:
            coroutine.close()  # type: ignore[attr-defined]
            raise RuntimeError("a sync method of AgentMemoryStore was called from its own loop")
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()  # type: ignore[arg-type]

    def submit(self, coroutine: Awaitable[_T]) -> "concurrent.futures.Future[_T]":
        return asyncio.run_coroutine_threadsafe(coroutine, self._start())  # type: ignore[arg-type]

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_run_forever, args=(loop,), name="agent-memory-langgraph", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
                # At interpreter exit (or when the adapter is collected) the loop stops, so
                # nothing waits on a thread that no one will join.
                weakref.finalize(self, _stop_loop, loop, thread)
            return self._loop

    def stop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            _stop_loop(loop, thread)


def _run_forever(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()


async def _drain() -> None:
    """Cancel what still runs on the private loop (a sweeper), let it finish, then stop."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    asyncio.get_running_loop().stop()


def _stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    if loop.is_closed():
        return
    try:
        asyncio.run_coroutine_threadsafe(_drain(), loop)
    except RuntimeError:
        return  # closed meanwhile
    if thread is not threading.current_thread():
        thread.join(timeout=5)


class AgentMemoryStore(BaseStore):
    """A LangGraph ``BaseStore`` over ``store`` (any store of this package, started or not).

    ``application_id`` is the tenant every record belongs to; ``user_at`` the position of
    the end user's id in every namespace tuple; ``user_id`` binds the adapter to one user
    (refusing any other before I/O); ``ttl`` is a default TTL in minutes or a ``TTLConfig``;
    ``max_scan`` bounds what one call reads; ``clock`` (epoch seconds, for tests with a
    ``ManualClock``) is the time expiries are computed from. ``index=`` is refused: this
    store has no embeddings.
    """

    supports_ttl: bool = True
    __slots__ = (
        "_store",
        "_application_id",
        "_user_at",
        "_user_id",
        "_max_scan",
        "_clock",
        "_loop",
        "_started",
        "_closed",
        "_sweeper",
        "_scopes",
        "_owner",
        "ttl_config",
    )

    def __init__(
        self,
        store: MemoryStore,
        *,
        application_id: str,
        user_at: int,
        user_id: Optional[str] = None,
        ttl: Union[float, TTLConfig, None] = None,
        max_scan: int = DEFAULT_MAX_SCAN,
        index: Any = None,
        clock: Optional[Callable[[], float]] = None,
    ) -> None:
        if index is not None:
            raise ValueError(
                "AgentMemoryStore has no embeddings and takes no index= configuration: its "
                "search is a literal match over the value's text, by design. For similarity "
                "search, keep a vector store beside it (for example LangGraph's own store "
                "with index=) and write to both."
            )
        if not isinstance(user_at, int) or isinstance(user_at, bool) or user_at < 0:
            raise ValueError("user_at must be a non-negative int: the user's label position")
        if not isinstance(max_scan, int) or max_scan < 1:
            raise ValueError("max_scan must be a positive int")
        # The ids are checked by the core, here once, so a bad one fails at construction.
        MemoryScope(application_id, user_id if user_id is not None else "check")
        self._store = store
        self._application_id = application_id
        self._user_at = user_at
        self._user_id = user_id
        self._max_scan = max_scan
        self._clock = clock or time.time
        self._loop = _LoopThread()
        self._started = False
        self._closed = False
        self._sweeper: Optional[concurrent.futures.Future] = None
        self._scopes: Dict[Tuple[str, ...], MemoryScope] = {}
        self._owner = True
        if ttl is None:
            self.ttl_config: Optional[TTLConfig] = None
        elif isinstance(ttl, Mapping):
            self.ttl_config = TTLConfig(**ttl)  # type: ignore[typeddict-item]
        else:
            self.ttl_config = TTLConfig(default_ttl=float(ttl), refresh_on_read=True)

    # --- life cycle ----------------------------------------------------------------------------

    async def astart(self) -> None:
        """Start the underlying store (idempotent; every operation does it on first use)."""
        if self._closed:
            raise RuntimeError("this AgentMemoryStore is closed")
        if not self._started:
            await self._store.start()
            self._started = True

    async def aclose(self) -> None:
        """Close the underlying store (a ``for_user`` view leaves it open). The adapter
        answers no more; ``close()`` also stops the private loop thread."""
        self._closed = True
        self._stop_sweeper()
        if self._started:
            self._started = False
            if self._owner:
                await self._store.close()

    def close(self) -> None:
        """Close the underlying store and stop the private loop thread (a ``for_user`` view
        leaves both to the adapter it came from). Idempotent."""
        if not self._closed:
            self._closed = True
            self._stop_sweeper()
            if self._started:
                self._started = False
                if self._owner:
                    self._loop.run(self._store.close())
        if self._owner:
            self._loop.stop()

    def for_user(self, user_id: str) -> "AgentMemoryStore":
        """This adapter bound to one end user (as ``user_id=`` binds it): what to hand to the
        graph serving an authenticated user. The view shares the underlying store and the
        loop thread; closing it closes neither."""
        self._check_user(user_id, "user_id")
        view = AgentMemoryStore(
            self._store,
            application_id=self._application_id,
            user_at=self._user_at,
            user_id=user_id,
            ttl=self.ttl_config,
            max_scan=self._max_scan,
            clock=self._clock,
        )
        view._loop = self._loop
        view._owner = False
        return view

    async def __aenter__(self) -> "AgentMemoryStore":
        await self.astart()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
        if self._owner:
            self._loop.stop()

    def __enter__(self) -> "AgentMemoryStore":
        self._loop.run(self.astart())
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AgentMemoryStore(store={self._store!r}, user_at={self._user_at})"

    # --- BaseStore -----------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> List[Result]:
        """Run ``ops`` in order on the private loop; results in the order of the ops."""
        return self._loop.run(self.abatch(ops))

    async def abatch(self, ops: Iterable[Op]) -> List[Result]:
        """Run ``ops`` in order; results in the order of the ops. Every op is checked (labels,
        the user, the namespace's limits) before any of them runs."""
        planned = [self._plan(op) for op in ops]
        if not self._started:
            await self.astart()
        results: List[Result] = []
        for op, scope in planned:
            results.append(await self._execute(op, scope))
        return results

    def put(  # type: ignore[override]
        self,
        namespace: Tuple[str, ...],
        key: str,
        value: Optional[Mapping[str, Any]],
        index: Union[Literal[False], List[str], None] = None,
        *,
        ttl: Union[float, None, NotProvided] = NOT_PROVIDED,
        expected_revision: Optional[str] = None,
        create_only: bool = False,
    ) -> None:
        """LangGraph's ``put`` (``index`` changes nothing), plus ``expected_revision`` (write
        only over that revision) and ``create_only`` (only when the key is free); either
        raises ``MemoryConflictError`` otherwise."""
        self._loop.run(
            self.aput(
                namespace,
                key,
                value,  # type: ignore[arg-type]
                index,
                ttl=ttl,
                expected_revision=expected_revision,
                create_only=create_only,
            )
        )

    async def aput(  # type: ignore[override]
        self,
        namespace: Tuple[str, ...],
        key: str,
        value: Optional[Mapping[str, Any]],
        index: Union[Literal[False], List[str], None] = None,
        *,
        ttl: Union[float, None, NotProvided] = NOT_PROVIDED,
        expected_revision: Optional[str] = None,
        create_only: bool = False,
    ) -> None:
        """The async form of ``put``."""
        op = PutOp(tuple(namespace), str(key), value, index=index, ttl=self._ttl(ttl))
        if expected_revision is None and not create_only:
            await self.abatch([op])
        else:
            await self.abatch([_ConditionalPut(op, expected_revision, create_only)])  # type: ignore[list-item]

    # --- trusted maintenance -------------------------------------------------------------------

    async def aerase_user(self, user_id: str) -> int:
        """Physically erase everything of ``user_id`` in this application, every namespace
        (the core's ``delete_user``); the number of records removed."""
        self._check_user(user_id, "user_id")
        await self.astart()
        return await self._store.delete_user(self._application_id, user_id)

    def erase_user(self, user_id: str) -> int:
        """The sync form of ``aerase_user``."""
        return self._loop.run(self.aerase_user(user_id))

    async def adelete_namespace(self, namespace: Tuple[str, ...]) -> int:
        """Physically erase the namespace and every namespace under it (the core's
        ``delete_all``, expired records included); the number of records removed. A prefix
        that stops before the user position erases it for every user (trusted code)."""
        namespace = tuple(namespace)
        self._check_labels(namespace)
        if not namespace:
            raise InvalidNamespaceError("delete_namespace needs a non-empty namespace")
        self._check_prefix_user(namespace)
        await self.astart()
        removed = 0
        async for scope, _ in self._namespaces(namespace, budget=_Budget(self._max_scan)):
            removed += await self._store.delete_all(scope)
        return removed

    def delete_namespace(self, namespace: Tuple[str, ...]) -> int:
        """The sync form of ``adelete_namespace``."""
        return self._loop.run(self.adelete_namespace(namespace))

    async def asweep_ttl(self) -> int:
        """Physically remove expired records of every namespace this adapter can see (one user
        with ``user_id``, else the application's users), in bounded ``purge_expired`` pages;
        the number removed. Expired items are invisible without it: this reclaims space."""
        await self.astart()
        removed = 0
        for user in await self._all_users():
            async for scope in self._user_scopes(user, _Budget(None)):
                after: Optional[str] = None
                while True:
                    page = await self._store.purge_expired(scope, 100, after)
                    removed += page.deleted
                    after = page.next_cursor
                    if after is None:
                        break
        return removed

    def sweep_ttl(self) -> int:
        """The sync form of ``asweep_ttl``."""
        return self._loop.run(self.asweep_ttl())

    def start_ttl_sweeper(
        self, sweep_interval_minutes: Optional[float] = None
    ) -> "concurrent.futures.Future[None]":
        """Sweep every ``sweep_interval_minutes`` (the TTL config's, else 5) on the private
        loop until ``stop_ttl_sweeper()`` or ``close()``."""
        if self._sweeper is not None and not self._sweeper.done():
            return self._sweeper
        minutes = sweep_interval_minutes
        if minutes is None:
            minutes = (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        self._sweeper = self._loop.submit(self._sweep_forever(float(minutes) * 60))
        return self._sweeper

    def stop_ttl_sweeper(self, timeout: Optional[float] = None) -> bool:
        """Stop the sweeper; whether it stopped within ``timeout`` seconds."""
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is None:
            return True
        sweeper.cancel()
        try:
            sweeper.result(timeout)
        except (concurrent.futures.CancelledError, asyncio.CancelledError):
            return True
        except concurrent.futures.TimeoutError:
            return False
        return True

    async def _sweep_forever(self, seconds: float) -> None:
        while True:
            await self.asweep_ttl()
            await asyncio.sleep(seconds)

    def _stop_sweeper(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    # --- checking, before any I/O --------------------------------------------------------------

    def _plan(self, op: Any) -> Tuple[Any, Optional[MemoryScope]]:
        if isinstance(op, _ConditionalPut):
            self._check_put_namespace(op.op.namespace)
            return op, self._scope(op.op.namespace)
        if isinstance(op, PutOp):
            self._check_put_namespace(op.namespace)
            return op, self._scope(op.namespace)
        if isinstance(op, GetOp):
            self._check_labels(op.namespace)
            return op, self._scope(op.namespace)
        if isinstance(op, SearchOp):
            self._check_labels(op.namespace_prefix)
            self._check_prefix_user(op.namespace_prefix)
            if op.limit < 0 or op.offset < 0:
                raise ValueError("search limit and offset must not be negative")
            return op, None
        if isinstance(op, ListNamespacesOp):
            for condition in op.match_conditions or ():
                self._check_labels(condition.path, wildcard=True)
                if condition.match_type == "prefix":
                    self._check_prefix_user(condition.path)
                elif condition.match_type != "suffix":
                    raise ValueError(f"unsupported match type: {condition.match_type!r}")
            if op.limit < 0 or op.offset < 0:
                raise ValueError("list_namespaces limit and offset must not be negative")
            if op.max_depth is not None and op.max_depth < 1:
                raise ValueError("max_depth must be at least 1")
            return op, None
        raise ValueError(f"unknown store operation: {type(op).__name__}")

    def _check_labels(self, namespace: Tuple[str, ...], *, wildcard: bool = False) -> None:
        if not isinstance(namespace, tuple):
            raise InvalidNamespaceError("a namespace must be a tuple of strings")
        for position, label in enumerate(namespace):
            if not isinstance(label, str):
                raise InvalidNamespaceError(
                    f"namespace label at position {position} must be a string"
                )
            if not label:
                raise InvalidNamespaceError(
                    f"namespace label at position {position} must not be empty"
                )
            if "." in label:
                raise InvalidNamespaceError(
                    f"namespace label at position {position} must not contain '.'"
                )
            if "\x00" in label:
                raise InvalidNamespaceError(
                    f"namespace label at position {position} must not contain NUL"
                )
            if label == "*" and not wildcard and position == self._user_at:
                raise InvalidNamespaceError(
                    f"namespace label at position {position} (the user) must not be '*'"
                )

    def _check_put_namespace(self, namespace: Tuple[str, ...]) -> None:
        self._check_labels(namespace)
        if not namespace:
            raise InvalidNamespaceError("a namespace must not be empty")
        if namespace[0] == "langgraph":
            raise InvalidNamespaceError('a namespace\'s root label must not be "langgraph"')

    def _check_user(self, user_id: str, where: str) -> None:
        if self._user_id is not None and user_id != self._user_id:
            raise InvalidNamespaceError(
                f"{where} names another user than the one this store serves"
            )

    def _check_prefix_user(self, prefix: Tuple[str, ...]) -> None:
        if len(prefix) > self._user_at and prefix[self._user_at] != "*":
            self._check_user(prefix[self._user_at], f"namespace label at position {self._user_at}")

    def _scope(self, namespace: Tuple[str, ...]) -> MemoryScope:
        # Scopes are immutable and a namespace is checked before it is cached: agents reuse a
        # handful of namespaces, so most calls skip building one.
        scope = self._scopes.get(namespace)
        if scope is not None:
            return scope
        scope = self._new_scope(namespace)
        if len(self._scopes) >= _SCOPE_CACHE:
            self._scopes.clear()
        self._scopes[namespace] = scope
        return scope

    def _new_scope(self, namespace: Tuple[str, ...]) -> MemoryScope:
        if len(namespace) <= self._user_at:
            raise InvalidNamespaceError(
                f"a namespace needs at least {self._user_at + 1} labels: the end user's id is "
                f"at position {self._user_at}"
            )
        user = namespace[self._user_at]
        self._check_user(user, f"namespace label at position {self._user_at}")
        rest = namespace[: self._user_at] + namespace[self._user_at + 1 :]
        try:
            return MemoryScope(self._application_id, user, ".".join(rest) or None)
        except MemoryValidationError as error:
            raise InvalidNamespaceError(f"namespace does not fit the store: {error}") from None

    def _namespace_of(self, scope: MemoryScope) -> Optional[Tuple[str, ...]]:
        """The LangGraph tuple of a scope, or ``None`` when it has no such form (a namespace
        another program wrote, with too few labels or an empty one)."""
        labels: List[str] = scope.namespace.split(".") if scope.namespace else []
        if len(labels) < self._user_at or any(not label for label in labels):
            return None
        return tuple(labels[: self._user_at]) + (scope.user_id,) + tuple(labels[self._user_at :])

    def _ttl(self, ttl: Union[float, None, NotProvided]) -> Optional[float]:
        if ttl is NOT_PROVIDED:
            return (self.ttl_config or {}).get("default_ttl")
        return ttl  # type: ignore[return-value]

    # --- running -------------------------------------------------------------------------------

    async def _execute(self, op: Any, scope: Optional[MemoryScope]) -> Result:
        if isinstance(op, GetOp):
            record = await self._store.get(scope, op.key)  # type: ignore[arg-type]
            if record is None:
                return None
            if op.refresh_ttl and record.expires_at is not None:
                record = await self._refreshed(record)
            return self._item(record, op.namespace)
        if isinstance(op, PutOp):
            await self._write(scope, op, None, False)  # type: ignore[arg-type]
            return None
        if isinstance(op, _ConditionalPut):
            await self._write(scope, op.op, op.expected_revision, op.create_only)  # type: ignore[arg-type]
            return None
        if isinstance(op, SearchOp):
            return await self._search(op)
        return await self._list_namespaces(op)

    async def _write(
        self,
        scope: MemoryScope,
        op: PutOp,
        expected_revision: Optional[str],
        create_only: bool,
    ) -> None:
        if op.value is None:
            if create_only:
                raise ValueError("create_only needs a value to create")
            await self._store.delete(scope, op.key, expected_revision)
            return
        if not isinstance(op.value, Mapping):
            raise TypeError("a LangGraph store value must be a mapping (a JSON object)")
        content = json.dumps(dict(op.value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        if len(content.encode("utf-8")) > MAX_CONTENT_BYTES:
            error = MemoryValidationError(
                f"invalid value: must be at most {MAX_CONTENT_BYTES} bytes as compact JSON"
            )
            error.field, error.reason = "value", f"must be at most {MAX_CONTENT_BYTES} bytes"
            raise error
        metadata = None
        expires_at = None
        if op.ttl is not None:
            if not op.ttl > 0 or math.isinf(op.ttl):
                raise ValueError("ttl must be a positive, finite number of minutes")
            metadata = {_TTL_FIELD: op.ttl}
            expires_at = self._clock() + op.ttl * 60
        await self._store.put(
            scope,
            op.key,
            content,
            metadata=metadata,
            expires_at=expires_at,
            expected_revision=expected_revision,
            create_only=create_only,
        )

    async def _refreshed(self, record: MemoryRecord) -> MemoryRecord:
        """The record with its expiry moved by its TTL, written only over the revision read:
        a concurrent update wins, and the record as read is returned."""
        ttl = record.metadata.get(_TTL_FIELD) if record.expires_at is not None else None
        if not isinstance(ttl, (int, float)) or isinstance(ttl, bool) or ttl <= 0:
            return record
        try:
            return await self._store.put(
                record.scope,
                record.key,
                record.content,
                metadata=record.metadata,
                expires_at=self._clock() + ttl * 60,
                expected_revision=record.revision,
                source=record.source,
            )
        except MemoryConflictError:
            return record

    def _item(self, record: MemoryRecord, namespace: Tuple[str, ...]) -> AgentMemoryItem:
        return AgentMemoryItem(
            revision=record.revision,
            value=json.loads(record.content),
            key=record.key,
            namespace=namespace,
            created_at=_datetime(record.created_at),
            updated_at=_datetime(record.updated_at),
        )

    async def _search(self, op: SearchOp) -> List[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        query = _query_words(op.query) if op.query else None
        wanted = op.offset + op.limit
        if op.limit == 0:
            return []
        budget = _Budget(self._max_scan)
        matched: List[Tuple[MemoryRecord, Any, Tuple[str, ...]]] = []
        narrowing = _narrowing(query, op.filter)
        # Without a filter almost every record read is returned: read no more than needed.
        exact = not op.filter
        async for scope, namespace in self._namespaces(prefix, budget=budget):
            missing = lambda: wanted - len(matched)  # noqa: E731
            records = self._records(scope, narrowing, budget, missing, exact)
            async for record in records:
                value = json.loads(record.content)
                if query and not _text_matches(value, query):
                    continue
                if op.filter and not _filter_matches(value, op.filter):
                    continue
                matched.append((record, value, namespace))
                if len(matched) >= wanted:
                    break
            if len(matched) >= wanted:
                break
        results = []
        for record, value, namespace in matched[op.offset :]:
            if op.refresh_ttl and record.expires_at is not None:
                record = await self._refreshed(record)
            results.append(
                AgentMemorySearchItem(
                    revision=record.revision,
                    namespace=namespace,
                    key=record.key,
                    value=value,
                    created_at=_datetime(record.created_at),
                    updated_at=_datetime(record.updated_at),
                    score=None,
                )
            )
        return results

    async def _records(
        self,
        scope: MemoryScope,
        narrowing: Optional["_Narrowing"],
        budget: "_Budget",
        missing: Callable[[], int],
        exact: bool,
    ) -> "AsyncIterator[MemoryRecord]":
        """The live records of one namespace in key order: every one without a narrowing,
        else the core's candidates for it (a superset of the matches, which the caller
        checks). With ``exact``, each page asks for no more than the ``missing()`` results."""
        after: Optional[str] = None
        while True:
            limit = max(1, min(_PAGE, missing())) if exact else _PAGE
            if narrowing is None:
                page = await self._store.list(scope, limit, after)
            else:
                page = await self._store.search(
                    scope,
                    narrowing.text,
                    limit,
                    after,
                    match=narrowing.match,
                    ignore_case=narrowing.ignore_case,
                )
            for record in page.items:
                budget.spend("records")
                yield record
            after = page.next_cursor
            if after is None:
                return

    async def _namespaces(
        self, prefix: Tuple[str, ...], *, budget: "_Budget"
    ) -> "AsyncIterator[Tuple[MemoryScope, Tuple[str, ...]]]":
        """The namespaces under ``prefix`` (label by label, never a text prefix), users in
        byte order, then tuples in label order."""
        exact: Optional[MemoryScope] = None
        if len(prefix) > self._user_at:
            users: AsyncIterable[str] = _aiter([prefix[self._user_at]])
            try:
                exact = self._scope(prefix)
            except InvalidNamespaceError:
                return  # too long for the store: nothing can be under it
            # The prefix itself comes first in label order: often it answers alone, with no
            # listing of the user's namespaces.
            yield exact, prefix
        else:
            users = self._users()
        async for user in users:
            found = []
            async for scope in self._user_scopes(user, budget):
                namespace = self._namespace_of(scope)
                if namespace is None or namespace[: len(prefix)] != prefix or scope == exact:
                    continue
                found.append((namespace, scope))
            found.sort(key=lambda pair: pair[0])
            for namespace, scope in found:
                yield scope, namespace

    async def _user_scopes(self, user: str, budget: "_Budget") -> "AsyncIterator[MemoryScope]":
        after: Optional[str] = None
        while True:
            page = await self._store.list_namespaces(self._application_id, user, _PAGE, after)
            for scope in page.items:
                budget.spend("namespaces")
                yield scope
            after = page.next_cursor
            if after is None:
                return

    async def _users(self) -> "AsyncIterator[str]":
        """The users this adapter may see, in byte order: its own, or every user of the
        application, one page at a time."""
        if self._user_id is not None:
            yield self._user_id
            return
        after: Optional[str] = None
        while True:
            page = await self._store.list_users(self._application_id, _PAGE, after)
            for user in page.items:
                yield user
            after = page.next_cursor
            if after is None:
                return

    async def _all_users(self) -> List[str]:
        return [user async for user in self._users()]

    async def _list_namespaces(self, op: ListNamespacesOp) -> List[Tuple[str, ...]]:
        conditions = tuple(op.match_conditions or ())
        wanted = op.offset + op.limit
        if op.limit == 0:
            return []
        budget = _Budget(self._max_scan)
        users: AsyncIterable[str]
        fixed = [
            c.path[self._user_at]
            for c in conditions
            if c.match_type == "prefix" and len(c.path) > self._user_at and c.path[self._user_at] != "*"
        ]
        users = _aiter(fixed[:1]) if fixed else self._users()
        seen: Dict[Tuple[str, ...], None] = {}
        async for user in users:
            found = set()
            async for scope in self._user_scopes(user, budget):
                namespace = self._namespace_of(scope)
                if namespace is None or not all(_condition_matches(c, namespace) for c in conditions):
                    continue
                if op.max_depth is not None:
                    namespace = namespace[: op.max_depth]
                found.add(namespace)
            for namespace in sorted(found):
                seen.setdefault(namespace, None)
            if len(seen) >= wanted:
                break
        return list(seen)[op.offset : wanted]


async def _aiter(items: Sequence[_T]) -> AsyncIterator[_T]:
    for item in items:
        yield item


class _Budget:
    """What one call may still read; past it, ``ScanLimitError``."""

    __slots__ = ("left", "limit")

    def __init__(self, limit: Optional[int]) -> None:
        self.limit = limit
        self.left = limit

    def spend(self, what: str) -> None:
        if self.left is None:
            return
        if self.left <= 0:
            raise ScanLimitError(
                f"answering would read more than max_scan={self.limit} {what}: narrow the "
                "namespace prefix, lower the offset, add a query, or raise max_scan"
            )
        self.left -= 1


def _datetime(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def _json_text(word: str) -> str:
    """``word`` as it reads inside compact JSON text: JSON escapes character by character
    (and folding never makes or unmakes an escape), so a string field containing the word
    holds this text in the record's content, in either case."""
    return json.dumps(word, ensure_ascii=False)[1:-1]


class _Narrowing(NamedTuple):
    """A core search whose results are a superset of a LangGraph search's matches."""

    text: str
    match: str
    ignore_case: bool


def _narrowing(words: Optional[List[str]], filter: Optional[Mapping[str, Any]]) -> Optional[_Narrowing]:
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
        return _Narrowing(_first_words(texts), QUERY_MATCH, QUERY_IGNORE_CASE)
    if needles:
        longest = max(needles, key=len)
        return _Narrowing(_cut(longest, MAX_QUERY_BYTES), "phrase", False)
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


def _query_words(query: str) -> List[str]:
    """The distinct words of a query, folded, split as the core splits them (a query of any
    number of words: the datastore narrows by the first ones and ``_text_matches`` checks them
    all); ``[]`` for a query of only white space, which then
    restricts nothing. A query of any length works: the core sees ``_narrowing``'s part."""
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


def _text_matches(value: Any, words: List[str]) -> bool:
    """Whether every (folded) word occurs in a string field of the value, folded alike."""
    texts = [fold_case(text) for text in _strings(value)]
    return all(any(word in text for text in texts) for word in words)


def _condition_matches(condition: MatchCondition, namespace: Tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(want == "*" or want == have for want, have in zip(path, part))


_MISSING = object()


def _filter_matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
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
