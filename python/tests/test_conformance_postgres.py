"""The core's conformance suite against PostgreSQL through ``PostgresMemoryStore``, on a
throwaway server from the Rust testkit (see servers.py), with a replica: a second store
instance (its own pool) on the same database."""

import unittest

from agent_memory import PostgresMemoryStore
from support import QuietSlowCallbacks
from agent_memory.testing import MemoryStoreConformanceMixin

import servers

POOL = {"min_size": 1, "max_size": 5}


class PostgresMemoryStoreConformance(QuietSlowCallbacks, MemoryStoreConformanceMixin, unittest.IsolatedAsyncioTestCase):
    async def make_store(self):
        return PostgresMemoryStore(servers.url("postgres"), pool_options=POOL)

    async def make_replica(self):
        return PostgresMemoryStore(servers.url("postgres"), pool_options=POOL)

    def make_store_with_quotas(self, **quotas):
        return PostgresMemoryStore(servers.url("postgres"), pool_options=POOL, **quotas)


if __name__ == "__main__":
    unittest.main()
