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

This module holds the store; beside it, ``_langgraph_namespaces`` maps namespaces to scopes and
walks them, ``_langgraph_search`` matches ``query`` and ``filter``, and ``_langgraph_loop`` is
the private loop thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import math
import time
from datetime import datetime, timezone
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Iterable,
    List,
    Literal,
    Mapping,
    NamedTuple,
    Optional,
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
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from ._errors import MemoryConflictError, MemoryValidationError
from ._langgraph_loop import LoopThread
from ._langgraph_namespaces import Budget, Namespaces
# QUERY_MATCH and QUERY_IGNORE_CASE: how ``query`` matches, named here beside ADK's in adk.py.
from ._langgraph_search import (  # noqa: F401
    QUERY_IGNORE_CASE,
    QUERY_MATCH,
    candidates,
    filter_matches,
    narrowing_of,
    query_words,
    text_matches,
)
from ._native import MAX_CONTENT_BYTES, MemoryRecord, MemoryScope
from ._protocol import MemoryStore
from ._scan import DEFAULT_MAX_SCAN, ScanLimitError

__all__ = [
    "AgentMemoryItem",
    "AgentMemorySearchItem",
    "AgentMemoryStore",
    "DEFAULT_MAX_SCAN",
    "ScanLimitError",
]

# Where the adapter keeps an item's TTL (minutes) in the record's metadata, for refreshes.
_TTL_FIELD = "langgraph_ttl_minutes"

if TYPE_CHECKING:
    from typing_extensions import Concatenate, ParamSpec

    _P = ParamSpec("_P")
_T = TypeVar("_T")


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


def _sync_form(
    coroutine_method: Callable[Concatenate[AgentMemoryStore, _P], Awaitable[_T]],
    doc: Optional[str] = None,
) -> Callable[Concatenate[AgentMemoryStore, _P], _T]:
    """The sync form of an ``AgentMemoryStore`` coroutine method named ``a<name>``: method
    ``<name>``, with the same signature, running the instance's ``a<name>`` on the adapter's
    private loop; documented by ``doc`` (or as the sync form of ``a<name>``)."""
    async_name = coroutine_method.__name__
    name = async_name[1:]

    def method(self: AgentMemoryStore, *args: Any, **kwargs: Any) -> _T:
        return self._loop.run(getattr(self, async_name)(*args, **kwargs))

    method.__name__ = name
    method.__qualname__ = f"AgentMemoryStore.{name}"
    method.__doc__ = doc or f"The sync form of ``{async_name}``."
    method.__signature__ = inspect.signature(coroutine_method)  # type: ignore[attr-defined]
    return method


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
        "_names",
        "_max_scan",
        "_clock",
        "_loop",
        "_started",
        "_closed",
        "_sweeper",
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
        self._names = Namespaces(store, application_id, user_at, user_id)
        self._max_scan = max_scan
        self._clock = clock or time.time
        self._loop = LoopThread()
        self._started = False
        self._closed = False
        self._sweeper: Optional[concurrent.futures.Future] = None
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
        self._names.check_user(user_id, "user_id")
        view = AgentMemoryStore(
            self._store,
            application_id=self._names.application_id,
            user_at=self._names.user_at,
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
        return f"AgentMemoryStore(store={self._store!r}, user_at={self._names.user_at})"

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

    put = _sync_form(  # type: ignore[assignment]
        aput,
        """LangGraph's ``put`` (``index`` changes nothing), plus ``expected_revision`` (write
        only over that revision) and ``create_only`` (only when the key is free); either
        raises ``MemoryConflictError`` otherwise.""",
    )

    # --- trusted maintenance -------------------------------------------------------------------

    async def aerase_user(self, user_id: str) -> int:
        """Physically erase everything of ``user_id`` in this application, every namespace
        (the core's ``delete_user``); the number of records removed."""
        self._names.check_user(user_id, "user_id")
        await self.astart()
        return await self._store.delete_user(self._names.application_id, user_id)

    erase_user = _sync_form(aerase_user)

    async def adelete_namespace(self, namespace: Tuple[str, ...]) -> int:
        """Physically erase the namespace and every namespace under it (the core's
        ``delete_all``, expired records included); the number of records removed. A prefix
        that stops before the user position erases it for every user (trusted code)."""
        namespace = tuple(namespace)
        self._names.check_labels(namespace)
        if not namespace:
            raise InvalidNamespaceError("delete_namespace needs a non-empty namespace")
        self._names.check_prefix_user(namespace)
        await self.astart()
        removed = 0
        async for scope, _ in self._names.under(namespace, budget=Budget(self._max_scan)):
            removed += await self._store.delete_all(scope)
        return removed

    delete_namespace = _sync_form(adelete_namespace)

    async def asweep_ttl(self) -> int:
        """Physically remove expired records of every namespace this adapter can see (one user
        with ``user_id``, else the application's users), in bounded ``purge_expired`` pages;
        the number removed. Expired items are invisible without it: this reclaims space."""
        await self.astart()
        removed = 0
        for user in await self._names.all_users():
            async for scope in self._names.user_scopes(user, Budget(None)):
                after: Optional[str] = None
                while True:
                    page = await self._store.purge_expired(scope, 100, after)
                    removed += page.deleted
                    after = page.next_cursor
                    if after is None:
                        break
        return removed

    sweep_ttl = _sync_form(asweep_ttl)

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
            self._names.check_put_namespace(op.op.namespace)
            return op, self._names.scope(op.op.namespace)
        if isinstance(op, PutOp):
            self._names.check_put_namespace(op.namespace)
            return op, self._names.scope(op.namespace)
        if isinstance(op, GetOp):
            self._names.check_labels(op.namespace)
            return op, self._names.scope(op.namespace)
        if isinstance(op, SearchOp):
            self._names.check_labels(op.namespace_prefix)
            self._names.check_prefix_user(op.namespace_prefix)
            if op.limit < 0 or op.offset < 0:
                raise ValueError("search limit and offset must not be negative")
            return op, None
        if isinstance(op, ListNamespacesOp):
            for condition in op.match_conditions or ():
                self._names.check_labels(condition.path, wildcard=True)
                if condition.match_type == "prefix":
                    self._names.check_prefix_user(condition.path)
                elif condition.match_type != "suffix":
                    raise ValueError(f"unsupported match type: {condition.match_type!r}")
            if op.limit < 0 or op.offset < 0:
                raise ValueError("list_namespaces limit and offset must not be negative")
            if op.max_depth is not None and op.max_depth < 1:
                raise ValueError("max_depth must be at least 1")
            return op, None
        raise ValueError(f"unknown store operation: {type(op).__name__}")


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
        return await self._names.listing(op, Budget(self._max_scan))

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
        query = query_words(op.query) if op.query else None
        wanted = op.offset + op.limit
        if op.limit == 0:
            return []
        budget = Budget(self._max_scan)
        matched: List[Tuple[MemoryRecord, Any, Tuple[str, ...]]] = []
        narrowing = narrowing_of(query, op.filter)
        # Without a filter almost every record read is returned: read no more than needed.
        exact = not op.filter
        async for scope, namespace in self._names.under(prefix, budget=budget):
            missing = lambda: wanted - len(matched)  # noqa: E731
            records = candidates(self._store, scope, narrowing, budget, missing, exact)
            async for record in records:
                value = json.loads(record.content)
                if query and not text_matches(value, query):
                    continue
                if op.filter and not filter_matches(value, op.filter):
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


def _datetime(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)
