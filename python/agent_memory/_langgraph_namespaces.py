"""The LangGraph adapter's namespaces (``agent_memory.langgraph``): how a LangGraph namespace
tuple maps to a scope of the store and back, the checks a namespace passes before any I/O,
and the walks over the namespaces and users a store holds, bounded by a ``_Budget``."""

from __future__ import annotations

from typing import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    List,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    TypeVar,
)

from langgraph.store.base import InvalidNamespaceError, ListNamespacesOp, MatchCondition

from ._errors import MemoryValidationError
from ._native import MAX_PAGE_LIMIT, MemoryScope
from ._protocol import MemoryStore
from ._scan import ScanLimitError

_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)
# How many items one page of the store holds when the adapter reads everything.
PAGE = MAX_PAGE_LIMIT
# How many namespaces' scopes the adapter keeps built.
_SCOPE_CACHE = 1024


class _Page(Protocol[_T_co]):
    """What ``paged`` reads of a page: its items and the cursor to continue from."""

    @property
    def items(self) -> Tuple[_T_co, ...]: ...
    @property
    def next_cursor(self) -> Optional[str]: ...


async def paged(read: Callable[[Optional[str]], Awaitable[_Page[_T]]]) -> AsyncIterator[_T]:
    """Every item of a listing, page after page: ``read(after)`` reads the page after the
    cursor (``None``: the first), until one has no ``next_cursor``."""
    after: Optional[str] = None
    while True:
        page = await read(after)
        for item in page.items:
            yield item
        after = page.next_cursor
        if after is None:
            return


class Budget:
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


class Namespaces:
    """The namespaces of one application in ``store``, as LangGraph tuples whose label at
    ``user_at`` is the end user's id; with ``user_id``, only that user's."""

    __slots__ = ("_store", "application_id", "user_at", "user_id", "_scopes")

    def __init__(
        self, store: MemoryStore, application_id: str, user_at: int, user_id: Optional[str]
    ) -> None:
        self._store = store
        self.application_id = application_id
        self.user_at = user_at
        self.user_id = user_id
        self._scopes: Dict[Tuple[str, ...], MemoryScope] = {}

    # --- checking, before any I/O --------------------------------------------------------------

    def check_labels(self, namespace: Tuple[str, ...], *, wildcard: bool = False) -> None:
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
            if label == "*" and not wildcard and position == self.user_at:
                raise InvalidNamespaceError(
                    f"namespace label at position {position} (the user) must not be '*'"
                )

    def check_put_namespace(self, namespace: Tuple[str, ...]) -> None:
        self.check_labels(namespace)
        if not namespace:
            raise InvalidNamespaceError("a namespace must not be empty")
        if namespace[0] == "langgraph":
            raise InvalidNamespaceError('a namespace\'s root label must not be "langgraph"')

    def check_user(self, user_id: str, where: str) -> None:
        if self.user_id is not None and user_id != self.user_id:
            raise InvalidNamespaceError(
                f"{where} names another user than the one this store serves"
            )

    def check_prefix_user(self, prefix: Tuple[str, ...]) -> None:
        if len(prefix) > self.user_at and prefix[self.user_at] != "*":
            self.check_user(prefix[self.user_at], f"namespace label at position {self.user_at}")

    # --- the mapping ---------------------------------------------------------------------------

    def scope(self, namespace: Tuple[str, ...]) -> MemoryScope:
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
        if len(namespace) <= self.user_at:
            raise InvalidNamespaceError(
                f"a namespace needs at least {self.user_at + 1} labels: the end user's id is "
                f"at position {self.user_at}"
            )
        user = namespace[self.user_at]
        self.check_user(user, f"namespace label at position {self.user_at}")
        rest = namespace[: self.user_at] + namespace[self.user_at + 1 :]
        try:
            return MemoryScope(self.application_id, user, ".".join(rest) or None)
        except MemoryValidationError as error:
            raise InvalidNamespaceError(f"namespace does not fit the store: {error}") from None

    def namespace_of(self, scope: MemoryScope) -> Optional[Tuple[str, ...]]:
        """The LangGraph tuple of a scope, or ``None`` when it has no such form (a namespace
        another program wrote, with too few labels or an empty one)."""
        labels: List[str] = scope.namespace.split(".") if scope.namespace else []
        if len(labels) < self.user_at or any(not label for label in labels):
            return None
        return tuple(labels[: self.user_at]) + (scope.user_id,) + tuple(labels[self.user_at :])

    # --- walking the store ---------------------------------------------------------------------

    async def under(
        self, prefix: Tuple[str, ...], *, budget: Budget
    ) -> "AsyncIterator[Tuple[MemoryScope, Tuple[str, ...]]]":
        """The namespaces under ``prefix`` (label by label, never a text prefix), users in
        byte order, then tuples in label order."""
        exact: Optional[MemoryScope] = None
        if len(prefix) > self.user_at:
            users: AsyncIterable[str] = _aiter([prefix[self.user_at]])
            try:
                exact = self.scope(prefix)
            except InvalidNamespaceError:
                return  # too long for the store: nothing can be under it
            # The prefix itself comes first in label order: often it answers alone, with no
            # listing of the user's namespaces.
            yield exact, prefix
        else:
            users = self.users()
        async for user in users:
            found = []
            async for scope in self.user_scopes(user, budget):
                namespace = self.namespace_of(scope)
                if namespace is None or namespace[: len(prefix)] != prefix or scope == exact:
                    continue
                found.append((namespace, scope))
            found.sort(key=lambda pair: pair[0])
            for namespace, scope in found:
                yield scope, namespace

    async def user_scopes(self, user: str, budget: Budget) -> "AsyncIterator[MemoryScope]":
        listing = lambda after: self._store.list_namespaces(  # noqa: E731
            self.application_id, user, PAGE, after
        )
        async for scope in paged(listing):
            budget.spend("namespaces")
            yield scope

    async def users(self) -> "AsyncIterator[str]":
        """The users this adapter may see, in byte order: its own, or every user of the
        application, one page at a time."""
        if self.user_id is not None:
            yield self.user_id
            return
        listing = lambda after: self._store.list_users(self.application_id, PAGE, after)  # noqa: E731
        async for user in paged(listing):
            yield user

    async def all_users(self) -> List[str]:
        return [user async for user in self.users()]

    async def listing(self, op: ListNamespacesOp, budget: Budget) -> List[Tuple[str, ...]]:
        """LangGraph's ``list_namespaces``: the namespaces passing every match condition, cut
        at ``max_depth``, each once, paged with ``limit`` / ``offset``."""
        conditions = tuple(op.match_conditions or ())
        wanted = op.offset + op.limit
        if op.limit == 0:
            return []
        users: AsyncIterable[str]
        fixed = [
            c.path[self.user_at]
            for c in conditions
            if c.match_type == "prefix" and len(c.path) > self.user_at and c.path[self.user_at] != "*"
        ]
        users = _aiter(fixed[:1]) if fixed else self.users()
        seen: Dict[Tuple[str, ...], None] = {}
        async for user in users:
            found = set()
            async for scope in self.user_scopes(user, budget):
                namespace = self.namespace_of(scope)
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


def _condition_matches(condition: MatchCondition, namespace: Tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(want == "*" or want == have for want, have in zip(path, part))
