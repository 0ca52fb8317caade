"""What the framework adapters share: the bound on what one call reads."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_SCAN", "ScanLimitError"]

DEFAULT_MAX_SCAN = 10_000
"""Records (or namespaces) one call of an adapter may read to answer, unless told otherwise."""


class ScanLimitError(ValueError):
    """Answering would read more than ``max_scan`` records or namespaces. Narrow the call
    (a longer namespace prefix, a smaller ``offset``, a query) or raise ``max_scan``; the
    adapters never return a silently short answer instead."""
