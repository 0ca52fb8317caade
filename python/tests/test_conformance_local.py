"""The core's conformance suite against the in-process and SQLite stores, and against stores
written in pure Python (one on the core's cursor helpers, with and without its own ``list_keys``,
and one with cursors of its own), each through its Python API."""

import tempfile
import unittest

from agent_memory import InMemoryStore, SqliteMemoryStore
from support import QuietSlowCallbacks
from agent_memory.testing import ManualClock, MemoryStoreConformanceMixin

from reference_store import DictStore
from signed_cursor_store import SignedCursorStore


class InMemoryStoreConformance(QuietSlowCallbacks, MemoryStoreConformanceMixin, unittest.IsolatedAsyncioTestCase):
    async def make_store(self):
        self.clock = ManualClock()
        return InMemoryStore(clock=self.clock)

    def make_store_with_quotas(self, **quotas):
        # An in-process store keeps its records inside the instance: each quota case's store
        # is a datastore of its own, and the case uses only it.
        return InMemoryStore(clock=self.clock, **quotas)


class SqliteMemoryStoreConformance(QuietSlowCallbacks, MemoryStoreConformanceMixin, unittest.IsolatedAsyncioTestCase):
    async def make_store(self):
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.path = f"{directory.name}/memories.db"
        self.clock = ManualClock()
        return SqliteMemoryStore(self.path, clock=self.clock)

    async def make_replica(self):
        # A second store on the same file: another process of the same application.
        return SqliteMemoryStore(self.path, clock=self.clock)

    def make_store_with_quotas(self, **quotas):
        return SqliteMemoryStore(self.path, clock=self.clock, **quotas)


class PurePythonStoreConformance(QuietSlowCallbacks, MemoryStoreConformanceMixin, unittest.IsolatedAsyncioTestCase):
    async def make_store(self):
        self.clock = ManualClock()
        return DictStore(self.clock)


class ListOnlyStore:
    """The reference store without ``list_keys``: the core serves that from ``list``."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        if name == "list_keys":
            raise AttributeError(name)
        return getattr(self._inner, name)


class PurePythonStoreWithoutListKeysConformance(
    QuietSlowCallbacks, MemoryStoreConformanceMixin, unittest.IsolatedAsyncioTestCase
):
    async def make_store(self):
        self.clock = ManualClock()
        return ListOnlyStore(DictStore(self.clock))


class OwnCursorStoreWithoutListKeysConformance(
    QuietSlowCallbacks, MemoryStoreConformanceMixin, unittest.IsolatedAsyncioTestCase
):
    """Cursors of its own and no ``list_keys``: the core serves it from ``list``, carrying the
    store's tokens as they are."""

    async def make_store(self):
        self.clock = ManualClock()
        return ListOnlyStore(SignedCursorStore(self.clock))


class OwnCursorStoreConformance(QuietSlowCallbacks, MemoryStoreConformanceMixin, unittest.IsolatedAsyncioTestCase):
    """A store whose cursors are its own opaque strings: the core carries them unread."""

    async def make_store(self):
        self.clock = ManualClock()
        return SignedCursorStore(self.clock)


if __name__ == "__main__":
    unittest.main()
