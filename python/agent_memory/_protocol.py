"""The ``MemoryStore`` protocol: what every store offers, the package's and yours."""

from __future__ import annotations

from typing import Any, Literal, Mapping, Optional, Protocol, Union, runtime_checkable

from ._native import (
    ApplicationPage,
    KeyInfoPage,
    MemoryCleanupPage,
    MemoryPage,
    MemoryRecord,
    MemoryScope,
    MemorySource,
    NamespacePage,
    UserPage,
)

__all__ = ["MatchMode", "MemoryStore", "MetadataFilter", "SourceLike"]

SourceLike = Union[MemorySource, Mapping[str, Optional[str]]]

MatchMode = Literal["phrase", "all_words", "any_word"]
"""How ``search`` matches its query: the whole query as one substring (``"phrase"``, the
default), every word of it (``"all_words"``) or any word (``"any_word"``); words are split on
Unicode white space, at most ``MAX_QUERY_WORDS``, each a literal substring."""

MetadataFilter = Mapping[str, Union[str, int, float, bool, None]]
"""Equality conditions on top-level metadata fields, all of which must hold (at most
``MAX_METADATA_FILTER_FIELDS``): numbers compare as numbers (``1`` equals ``1.0``), a
boolean equals only a boolean, ``None`` only a stored JSON ``null``, and a field that is
absent equals nothing."""


@runtime_checkable
class MemoryStore(Protocol):
    """Async persistence for explicit, scoped memories.

    Every operation applies the whole scope in the datastore; expired records are invisible;
    writes and revision checks are atomic; reads return detached records. No method calls a
    model. Subclassing is optional: a class with these methods is a ``MemoryStore``.
    ``agent_memory.testing.MemoryStoreConformanceMixin`` checks the guarantees.
    """

    async def start(self) -> None:
        """Open owned resources and create or validate storage. Idempotent."""

    async def close(self) -> None:
        """Release only what this store owns. Idempotent."""

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
        """Insert or replace ``key`` atomically and return the record with its new revision.

        ``expected_revision`` writes only over that live revision, ``create_only`` only when no
        live record has the key; otherwise ``MemoryConflictError``.
        """

    async def get(self, scope: MemoryScope, key: str) -> Optional[MemoryRecord]:
        """The live record at ``key``, or ``None``."""

    async def list(
        self,
        scope: MemoryScope,
        limit: int = 20,
        after: Optional[str] = None,
        prefix: str = "",
        *,
        metadata: Optional[MetadataFilter] = None,
    ) -> MemoryPage:
        """Live records in ascending key order (UTF-8 bytes); ``limit`` is 1 to 100. A
        non-empty ``prefix`` (at most 256 bytes, the key rules) keeps only the keys that start
        with it; a ``metadata`` filter keeps only the records whose metadata passes it (see
        ``MetadataFilter``). The page's cursor then continues only that listing: another
        prefix or filter with it is ``MemoryValidationError`` naming ``cursor``.

        A filtered listing inspects a bounded number of records per call, as ``search`` does,
        so its page may be short, even empty, and still have a cursor. The package calls a
        store written in Python with ``prefix=`` and ``metadata=`` only when they are given,
        so a store without them still serves every other listing."""

    async def list_keys(
        self,
        scope: MemoryScope,
        limit: int = 20,
        after: Optional[str] = None,
        prefix: str = "",
    ) -> KeyInfoPage:
        """The keys ``list`` would return, each as a ``KeyInfo`` with its content's size in
        UTF-8 bytes, read without reading the contents (a stored length, a header); cursors of
        its own kind (``agent_memory.provider.key_cursor("keys", ...)``). Optional for a store
        written in Python: without it, the core serves ``list_keys`` from the store's ``list``
        (reading the contents to measure them)."""

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
        """Live records whose content contains ``query`` literally, in ascending key order. A
        page may be empty and still have a cursor: continue until ``next_cursor`` is ``None``.

        - ``match``: ``"phrase"`` (the default) matches the whole query as one substring;
          ``"all_words"`` splits it on Unicode white space (at most ``MAX_QUERY_WORDS``
          words; only white space is ``MemoryValidationError`` naming ``query``) and matches
          when every word occurs, anywhere, in any order; ``"any_word"`` when one does.
          Anything else is ``MemoryValidationError`` naming ``match``.
        - ``ignore_case``: compare after Unicode *simple* case folding
          (``agent_memory.provider.fold_case``: the Kelvin sign matches ``k``, ``Σ``, ``σ``
          and ``ς`` match, ``ß`` never matches ``ss``), not ``str.lower()`` or
          ``str.casefold()``.
        - ``metadata``: only records whose metadata passes the filter (see
          ``MetadataFilter``).

        A cursor is bound to the mode, case and filter of the request that made it: with
        others it is ``MemoryValidationError`` naming ``cursor``. The package calls a store
        written in Python with ``match=``, ``ignore_case=`` and ``metadata=`` only when they
        differ from the defaults, so a store written before they existed still serves every
        search that does not use them; ``agent_memory.provider`` has ``search_words``,
        ``fold_case`` and the cursor helpers that take the options."""

    async def delete(
        self, scope: MemoryScope, key: str, expected_revision: Optional[str] = None
    ) -> bool:
        """Remove the record and its index entries; whether a live record existed."""

    async def delete_all(self, scope: MemoryScope) -> int:
        """Physically erase one namespace of one user, expired records included. Trusted
        maintenance only."""

    async def delete_user(self, application_id: str, user_id: str) -> int:
        """Physically erase every namespace of one application's user. Trusted maintenance
        only; after a failure, call again to remove what is left."""

    async def list_namespaces(
        self, application_id: str, user_id: str, limit: int = 20, after: Optional[str] = None
    ) -> NamespacePage:
        """Every namespace of the user that holds a record (expired ones included), the
        default namespace first."""

    async def list_users(
        self, application_id: str, limit: int = 20, after: Optional[str] = None
    ) -> UserPage:
        """The ids of the application's users that hold a record (expired ones included), in
        ascending byte order. Trusted maintenance only: never a model tool. A page may be
        short and still have a ``next_cursor``: continue while it is set."""

    async def list_applications(
        self, limit: int = 20, after: Optional[str] = None
    ) -> ApplicationPage:
        """The ids of the store's applications that hold a record (expired ones included), in
        ascending byte order. Trusted maintenance only: never a model tool. A page may be short
        and still have a ``next_cursor``: continue while it is set."""

    async def purge_expired(
        self, scope: MemoryScope, limit: int = 100, after: Optional[str] = None
    ) -> MemoryCleanupPage:
        """Inspect at most ``limit`` keys and physically remove the expired ones; continue
        while ``next_cursor`` is set, even when ``deleted`` is 0."""
