"""The providers the framework adapters are tested on (the package's four and a store
written in Python): each a mixin whose ``make_store``
returns a fresh, unstarted store of this package, and whose ``clock`` (a ``ManualClock``, or
``None`` when the datastore's own clock decides) lets expiry tests move time or wait."""

import asyncio
import tempfile
import uuid

from agent_memory import InMemoryStore, PostgresMemoryStore, RedisMemoryStore, SqliteMemoryStore
from agent_memory.testing import ManualClock

import servers


class Provider:
    clock = None

    def application_id(self):
        # Tests share one datastore per provider: each works under an application of its own.
        return f"fw-{uuid.uuid4().hex[:12]}"

    def now(self):
        import time

        return self.clock.now() if self.clock is not None else time.time()

    async def advance(self, seconds):
        """Move time forward: the manual clock, or real time for a server's own clock."""
        if self.clock is not None:
            self.clock.advance(seconds)
        else:
            await asyncio.sleep(seconds)


class InProcess(Provider):
    def make_store(self):
        self.clock = ManualClock()
        return InMemoryStore(clock=self.clock)


class Sqlite(Provider):
    def make_store(self):
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.clock = ManualClock()
        return SqliteMemoryStore(f"{directory.name}/memories.db", clock=self.clock)


class Postgres(Provider):
    def make_store(self):
        return PostgresMemoryStore(servers.url("postgres"), pool_options={"min_size": 1, "max_size": 4})


class Redis(Provider):
    def make_store(self):
        return RedisMemoryStore(servers.url("redis"))


class PurePython(Provider):
    """A store written in Python (the tests' reference store): the adapters take any store."""

    def make_store(self):
        from reference_store import DictStore

        self.clock = ManualClock()
        return DictStore(self.clock)


PROVIDERS = {
    "InProcess": InProcess,
    "Sqlite": Sqlite,
    "Postgres": Postgres,
    "Redis": Redis,
    "PurePython": PurePython,
}


def stamp(module_globals, cases, suffix):
    """One ``unittest`` class per provider: ``<Provider><suffix>`` from ``cases``."""
    import unittest

    for name, provider in PROVIDERS.items():
        module_globals[f"{name}{suffix}"] = type(
            f"{name}{suffix}", (provider, cases, unittest.IsolatedAsyncioTestCase), {}
        )
