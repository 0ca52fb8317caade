"""The exceptions every store raises, the package's own and stores written in Python alike.

Catch the class, never parse the message. Messages are fixed sentences from the core naming
the field and the rule ("invalid key: must be at most 256 bytes"); they never contain memory
content, keys, ids, URLs or a driver's text.

``MemoryError`` here is this package's base class, not Python's built-in out-of-memory error:
refer to it as ``agent_memory.MemoryError`` (or import it under another name) so the built-in
stays reachable.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "MemoryError",
    "MemoryValidationError",
    "MemoryConflictError",
    "MemoryQuotaError",
    "MemoryStorageError",
]


class MemoryError(Exception):  # noqa: A001 - the name the seed API uses; see the module docs
    """Base class of every error a memory store raises."""


class MemoryValidationError(MemoryError, ValueError):
    """Bad input: ``field`` broke the rule ``reason``. Nothing was changed; do not retry as is."""

    field: Optional[str] = None
    reason: Optional[str] = None


class MemoryConflictError(MemoryError):
    """A conditional write or delete found another revision (or none, or, for ``create_only``,
    a live record). Read the key again and decide."""


class MemoryStorageError(MemoryError):
    """The datastore failed. A write may or may not have committed: read the key again before
    retrying, and use ``expected_revision`` so a retry cannot overwrite a later update.
    ``provider`` names the store (``memory``, ``sqlite``, ``postgres``, ``redis``, ``python``)."""

    provider: Optional[str] = None


class MemoryQuotaError(MemoryError):
    """A write would take the application user past a quota of the store; nothing was changed.
    ``quota`` names it (``max_records_per_user`` or ``max_bytes_per_user``) and ``limit`` gives
    its value. Delete or purge records the user no longer needs, or raise the limit."""

    quota: Optional[str] = None
    limit: Optional[int] = None


# A new error of the core gets one class here and one arm in python/src/errors.rs.
