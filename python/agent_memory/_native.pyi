# Type stubs for agent_memory._native, the Rust core as an extension module. The public API
# is re-exported by agent_memory (and agent_memory.provider / agent_memory.testing); the
# Native* classes are internal and wrapped by the classes of agent_memory._stores.

import os
from typing import (
    Any,
    Awaitable,
    Callable,
    Generic,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

_SourceLike = Union["MemorySource", Mapping[str, Optional[str]]]
_MatchMode = Literal["phrase", "all_words", "any_word"]
_MetadataFilter = Mapping[str, Union[str, int, float, bool, None]]
_Path = Union[str, "os.PathLike[str]"]
_Item = TypeVar("_Item")

VERSION: str
MAX_KEY_BYTES: int
MAX_CONTENT_BYTES: int
MAX_METADATA_SOURCE_BYTES: int
MAX_METADATA_DEPTH: int
MAX_ID_BYTES: int
MAX_CURSOR_BYTES: int
MAX_PAGE_LIMIT: int
DEFAULT_PAGE_LIMIT: int
MAX_QUERY_BYTES: int
MAX_QUERY_WORDS: int
MAX_METADATA_FILTER_FIELDS: int

class MemoryScope:
    """Trusted application/user isolation, with an optional namespace (``None``: default)."""

    def __init__(self, application_id: str, user_id: str, namespace: Optional[str] = None) -> None: ...
    @property
    def application_id(self) -> str: ...
    @property
    def user_id(self) -> str: ...
    @property
    def namespace(self) -> Optional[str]: ...
    def with_namespace(self, name: Optional[str]) -> MemoryScope: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class MemorySource:
    """Provenance of a write: never an instruction or an authorization."""

    def __init__(
        self,
        session_id: Optional[str] = None,
        invocation_id: Optional[str] = None,
        agent: Optional[str] = None,
    ) -> None: ...
    @property
    def session_id(self) -> Optional[str]: ...
    @property
    def invocation_id(self) -> Optional[str]: ...
    @property
    def agent(self) -> Optional[str]: ...

class MemoryRecord:
    """One memory, frozen. Timestamps are UTC epoch seconds."""

    def __init__(
        self,
        scope: MemoryScope,
        key: str,
        content: str,
        metadata: Optional[Mapping[str, Any]],
        revision: str,
        created_at: float,
        updated_at: float,
        expires_at: Optional[float] = None,
        source: Optional[_SourceLike] = None,
    ) -> None: ...
    @property
    def scope(self) -> MemoryScope: ...
    @property
    def key(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def metadata(self) -> dict[str, Any]: ...
    @property
    def revision(self) -> str: ...
    @property
    def created_at(self) -> float: ...
    @property
    def updated_at(self) -> float: ...
    @property
    def expires_at(self) -> Optional[float]: ...
    @property
    def source(self) -> MemorySource: ...

class _Page(Generic[_Item]):
    # What every page class has (the Rust macro page_class! declares them all alike): a tuple
    # of items and the cursor to pass as ``after``. Not a class of the module: the stubs' way
    # of saying it once.
    def __init__(self, items: Sequence[_Item], next_cursor: Optional[str] = None) -> None: ...
    @property
    def items(self) -> Tuple[_Item, ...]: ...
    @property
    def next_cursor(self) -> Optional[str]: ...

class MemoryPage(_Page[MemoryRecord]):
    """A bounded page; pass ``next_cursor`` as ``after``, even after an empty page."""

class MemoryCleanupPage:
    """Physical removals of one bounded sweep; continue even when ``deleted`` is 0."""

    def __init__(self, deleted: int, next_cursor: Optional[str] = None) -> None: ...
    @property
    def deleted(self) -> int: ...
    @property
    def next_cursor(self) -> Optional[str]: ...

class NamespacePage(_Page[MemoryScope]):
    """One scope per namespace that holds records, the default namespace first."""

class UserPage(_Page[str]):
    """The ids of an application's users that hold records, in ascending byte order."""

class KeyInfo:
    """One key from ``list_keys``, with its content's size in bytes (UTF-8)."""

    def __init__(self, key: str, content_len: int) -> None: ...
    @property
    def key(self) -> str: ...
    @property
    def content_len(self) -> int: ...

class KeyInfoPage(_Page[KeyInfo]):
    """A page of ``list_keys``: ``KeyInfo`` items in ascending key order."""

class ApplicationPage(_Page[str]):
    """The ids of the store's applications that hold records, in ascending byte order."""

class Fact:
    """One fact of the fact port."""

    @property
    def id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def created_at(self) -> float: ...

class ManualClock:
    """Time that moves only when told (UTC epoch seconds)."""

    def __init__(self, start: Optional[float] = None) -> None: ...
    def now(self) -> float: ...
    def advance(self, seconds: float) -> None: ...
    def set(self, seconds: float) -> None: ...

class NativeStore:
    @staticmethod
    def memory(
        clock: Optional[ManualClock] = None,
        max_records_per_user: Optional[int] = None,
        max_bytes_per_user: Optional[int] = None,
    ) -> NativeStore: ...
    @staticmethod
    def sqlite(
        path: Optional[_Path] = None,
        clock: Optional[ManualClock] = None,
        max_records_per_user: Optional[int] = None,
        max_bytes_per_user: Optional[int] = None,
    ) -> NativeStore: ...
    @staticmethod
    def postgres(
        url: str,
        pool_options: Optional[Mapping[str, Any]] = None,
        setup_schema: bool = True,
        max_records_per_user: Optional[int] = None,
        max_bytes_per_user: Optional[int] = None,
    ) -> NativeStore: ...
    @staticmethod
    def redis(
        url: str, max_records_per_user: Optional[int] = None, max_bytes_per_user: Optional[int] = None
    ) -> NativeStore: ...
    @staticmethod
    def open(url: str) -> NativeStore: ...
    @property
    def provider(self) -> str: ...
    def start(self) -> Awaitable[None]: ...
    def close(self) -> Awaitable[None]: ...
    # ``delete_all``, ``delete_user``, ``list_namespaces``, ``list_users``,
    # ``list_applications`` and ``purge_expired``: the ``MemoryStore`` protocol's methods
    # (agent_memory._protocol), taking its arguments and returning an awaitable of its result.
    # agent_memory._stores forwards to them by name; the calls on one scope go through a
    # ``NativeScoped`` handle.
    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]: ...

class NativeFacts:
    def __init__(self, store: object, namespace: Optional[str] = None, source: Optional[_SourceLike] = None) -> None: ...
    def user(self, application_id: str, end_user_id: str) -> NativeUserFacts: ...

class NativeUserFacts:
    def remember(self, text: str) -> Awaitable[Fact]: ...
    def forget(self, fact_id: str) -> Awaitable[bool]: ...
    def recall(self, limit: Optional[int] = None) -> Awaitable[Tuple[Fact, ...]]: ...
    def erase(self) -> Awaitable[int]: ...

class NativeScoped:
    def __init__(self, store: object, scope: MemoryScope, source: Optional[_SourceLike] = None) -> None: ...
    @property
    def scope(self) -> MemoryScope: ...
    @property
    def source(self) -> MemorySource: ...
    def namespace(self, name: str) -> NativeScoped: ...
    # ``put``, ``get``, ``list``, ``list_keys``, ``search`` and ``delete``: the ``MemoryStore``
    # protocol's methods without their ``scope`` (the handle's), returning an awaitable of
    # their result. agent_memory._stores forwards to them by name.
    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]: ...
    def memory_tool(self, input: Mapping[str, Any]) -> Awaitable[Tuple[str, bool]]: ...

def review_link(
    application_id: str,
    user_id: str,
    *,
    base_url: str,
    key_file: Optional[Union[str, "os.PathLike[str]"]] = None,
    secret: Optional[bytes] = None,
    ttl_seconds: float = 900.0,
) -> str:
    """A sign-in link to the review page (``mcp --listen --review-key-file``) for one user,
    working once within ``ttl_seconds`` (at most a day)."""
    ...

def conformance_case_names() -> List[str]: ...
def run_conformance_case(
    name: str,
    store: object,
    replica: Optional[object] = None,
    clock: Optional[ManualClock] = None,
    with_quotas: Optional[Callable[..., object]] = None,
) -> Awaitable[None]: ...
def _panic_probe(pending: bool) -> Awaitable[None]: ...
def check_put(
    key: str,
    content: str,
    *,
    metadata: Optional[Mapping[str, Any]] = None,
    expires_at: Optional[float] = None,
    expected_revision: Optional[str] = None,
    create_only: bool = False,
    source: Optional[_SourceLike] = None,
    now: float,
) -> None: ...
def check_key(key: str) -> None: ...
def check_query(query: str, *, match: Optional[_MatchMode] = None) -> None: ...
def search_words(
    query: str, *, match: Optional[_MatchMode] = None, ignore_case: bool = False
) -> List[str]: ...
def fold_case(text: str) -> str: ...
def check_user(application_id: str, user_id: str) -> None: ...
def key_page(
    kind: str,
    scope: MemoryScope,
    limit: int,
    after: Optional[str] = None,
    prefix: str = "",
    *,
    match: Optional[_MatchMode] = None,
    ignore_case: bool = False,
    metadata: Optional[_MetadataFilter] = None,
) -> Optional[str]: ...
def key_cursor(
    kind: str,
    scope: MemoryScope,
    key: str,
    prefix: str = "",
    *,
    match: Optional[_MatchMode] = None,
    ignore_case: bool = False,
    metadata: Optional[_MetadataFilter] = None,
) -> str: ...
def namespace_page(application_id: str, user_id: str, limit: int, after: Optional[str] = None) -> Optional[str]: ...
def namespace_cursor(application_id: str, user_id: str, namespace: str) -> str: ...
def user_page(application_id: str, limit: int, after: Optional[str] = None) -> Optional[str]: ...
def user_cursor(application_id: str, user_id: str) -> str: ...
def application_page(limit: int, after: Optional[str] = None) -> Optional[str]: ...
def application_cursor(application_id: str) -> str: ...
