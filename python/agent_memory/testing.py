"""The conformance suite for memory stores, as a ``unittest`` mixin.

    import unittest
    from agent_memory.testing import MemoryStoreConformanceMixin
    from my_storage import MyMemoryStore

    class CustomMemoryTests(MemoryStoreConformanceMixin, unittest.IsolatedAsyncioTestCase):
        async def make_store(self):
            \"\"\"Return an unstarted provider for an isolated test database.\"\"\"
            return MyMemoryStore(...)

The mixin adds one ``test_<case>`` method per case of the Rust core's conformance suite: the
very cases the package's SQLite, PostgreSQL, Redis and in-process providers pass in Rust, one
rule each (isolation, revisions and conditional writes, expiry, paging and cursors, literal
search, erasure, namespaces, limits at their exact byte boundaries, hostile input,
concurrency, replicas, and the fact port and scoped handle over the store). Each test
starts the store, runs its case under a fresh random application id (so tests can share one
database and never wipe it), and closes the store. A broken rule fails the test with an
``AssertionError`` naming the rule and what was seen.

Optional hooks:

- ``async def make_replica(self)``: a second, independent, unstarted instance on the same
  datastore (what another replica of the application would build). The replica cases then
  race the two instances; without it they race tasks of one instance.
- ``def make_store_with_quotas(self, *, max_records_per_user, max_bytes_per_user)``: another
  unstarted instance on the same datastore (and clock) with those quotas (each an ``int`` or
  ``None``), for the quota cases; they raise ``MemoryQuotaError`` past a limit. A store
  without quotas leaves it undefined, and the quota cases are then skipped, saying so.
- ``self.clock``: when ``make_store`` builds a store that reads a ``ManualClock``, assign the
  clock to ``self.clock``; the expiry cases then move it instead of sleeping (about 3 s per
  expiry case otherwise, since the datastore's own clock decides).

Stores written in Python are called with this package's types (``MemoryScope``, epoch-second
floats, revision and cursor strings) and must return them (``MemoryRecord``, ``MemoryPage``,
…) and raise this package's exceptions; ``agent_memory.provider`` has the core's checks and
cursors for them (a store may make cursor strings of its own instead, and judge them itself).
"""

from __future__ import annotations

from typing import Any, Callable, Coroutine, Optional

from . import _native
from ._native import ManualClock

__all__ = ["CASE_NAMES", "ManualClock", "MemoryStoreConformanceMixin"]

#: Every case of the core's suite, in the core's order; one test method each.
CASE_NAMES = tuple(_native.conformance_case_names())


class MemoryStoreConformanceMixin:
    """Mix into ``unittest.IsolatedAsyncioTestCase`` and define ``make_store``."""

    clock: Optional[ManualClock] = None

    async def make_store(self) -> Any:
        """Return an unstarted store on an isolated test datastore."""
        raise NotImplementedError("define async def make_store(self) returning an unstarted store")

    async def make_replica(self) -> Any:
        """Return a second unstarted instance on the same datastore, or None (the default)."""
        return None

    make_store_with_quotas: Optional[Callable[..., Any]] = None

    async def run_conformance_case(self, name: str) -> None:
        """Runs the core's case ``name`` against a fresh store from ``make_store``."""
        with_quotas = self.make_store_with_quotas
        if name.startswith("quota_") and with_quotas is None:
            skip = getattr(self, "skipTest", None)
            if skip is not None:
                skip("the store has no quotas: define make_store_with_quotas to run this case")
            return
        store = await self.make_store()
        replica = await self.make_replica()
        clock = self.clock if isinstance(self.clock, ManualClock) else None
        await _native.run_conformance_case(name, store, replica, clock, with_quotas)


def _case_test(name: str) -> Callable[[Any], Coroutine[Any, Any, None]]:
    async def test(self: MemoryStoreConformanceMixin) -> None:
        await self.run_conformance_case(name)

    test.__name__ = f"test_{name}"
    test.__qualname__ = f"MemoryStoreConformanceMixin.test_{name}"
    test.__doc__ = f"Conformance case {name} of the agent-memory core."
    return test


for _name in CASE_NAMES:
    setattr(MemoryStoreConformanceMixin, f"test_{_name}", _case_test(_name))
del _name
