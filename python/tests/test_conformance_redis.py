"""The core's conformance suite against Redis through ``RedisMemoryStore``, on a throwaway
server from the Rust testkit (see servers.py), with a replica: a second store instance (its
own connections) on the same server."""

import unittest

from agent_memory import RedisMemoryStore
from support import QuietSlowCallbacks
from agent_memory.testing import MemoryStoreConformanceMixin

import servers


class RedisMemoryStoreConformance(QuietSlowCallbacks, MemoryStoreConformanceMixin, unittest.IsolatedAsyncioTestCase):
    async def make_store(self):
        return RedisMemoryStore(servers.url("redis"))

    async def make_replica(self):
        return RedisMemoryStore(servers.url("redis"))

    def make_store_with_quotas(self, **quotas):
        return RedisMemoryStore(servers.url("redis"), **quotas)


if __name__ == "__main__":
    unittest.main()
