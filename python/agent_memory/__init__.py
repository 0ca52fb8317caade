"""Explicit, scoped, long-term memory for AI agents, on agent-memory's Rust core.

A store saves the facts an agent (or the application around it) deliberately keeps for one
user, and reads them back in a later session: in this process (``InMemoryStore``), a SQLite
file (``SqliteMemoryStore``, the embedded default), PostgreSQL (``PostgresMemoryStore``) or
Redis (``RedisMemoryStore``). It never calls a model and has no embeddings: search is a
literal substring match (of the whole query, or of every or any of its words, optionally
ignoring case), and ``list`` and ``search`` can select by metadata fields.

    import asyncio
    from agent_memory import MemoryScope, SqliteMemoryStore

    async def main():
        async with SqliteMemoryStore("memories.db") as store:
            scope = MemoryScope("support-bot", "user-42")  # from trusted code, never a model
            await store.put(scope, "report-format", "Start with an executive summary.")
            page = await store.search(scope, "executive summary")
            print([record.key for record in page.items])

    asyncio.run(main())

Every check, limit and rule comes from the Rust core, the same for every provider and for
the CLI and MCP server; the Python classes convert arguments and results.
"""

from ._errors import (
    MemoryConflictError,
    MemoryQuotaError,
    MemoryError,
    MemoryStorageError,
    MemoryValidationError,
)
from ._native import (
    DEFAULT_PAGE_LIMIT,
    MAX_CONTENT_BYTES,
    MAX_ID_BYTES,
    MAX_KEY_BYTES,
    MAX_METADATA_DEPTH,
    MAX_METADATA_FILTER_FIELDS,
    MAX_METADATA_SOURCE_BYTES,
    MAX_PAGE_LIMIT,
    MAX_QUERY_WORDS,
    VERSION as __version__,
    ApplicationPage,
    KeyInfo,
    KeyInfoPage,
    Fact,
    MemoryCleanupPage,
    MemoryPage,
    MemoryRecord,
    MemoryScope,
    MemorySource,
    NamespacePage,
    UserPage,
    review_link,
)
from ._protocol import MatchMode, MemoryStore, MetadataFilter
from ._stores import (
    Facts,
    InMemoryStore,
    PostgresMemoryStore,
    RedisMemoryStore,
    ScopedMemory,
    SqliteMemoryStore,
    open_store,
)

__all__ = [
    "ApplicationPage",
    "KeyInfo",
    "KeyInfoPage",
    "DEFAULT_PAGE_LIMIT",
    "Fact",
    "Facts",
    "InMemoryStore",
    "MAX_CONTENT_BYTES",
    "MAX_ID_BYTES",
    "MAX_KEY_BYTES",
    "MAX_METADATA_DEPTH",
    "MAX_METADATA_FILTER_FIELDS",
    "MAX_METADATA_SOURCE_BYTES",
    "MAX_PAGE_LIMIT",
    "MAX_QUERY_WORDS",
    "MatchMode",
    "MemoryCleanupPage",
    "MemoryConflictError",
    "MemoryQuotaError",
    "MemoryError",
    "MemoryPage",
    "MemoryRecord",
    "MemoryScope",
    "MemorySource",
    "MemoryStorageError",
    "MemoryStore",
    "MemoryValidationError",
    "MetadataFilter",
    "NamespacePage",
    "PostgresMemoryStore",
    "RedisMemoryStore",
    "ScopedMemory",
    "SqliteMemoryStore",
    "UserPage",
    "open_store",
    "review_link",
]
