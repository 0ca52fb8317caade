"""Quotas through the Python API: the keyword options, ``MemoryQuotaError`` and its fields."""

import unittest

import agent_memory
from agent_memory import InMemoryStore, MemoryQuotaError, MemoryScope, MemoryValidationError


class QuotaTests(unittest.IsolatedAsyncioTestCase):
    async def test_a_write_past_a_quota_raises_memory_quota_error_and_changes_nothing(self):
        store = InMemoryStore(max_records_per_user=1)
        await store.start()
        scope = MemoryScope("app", "user-1")
        await store.put(scope, "a", "first")
        with self.assertRaises(MemoryQuotaError) as caught:
            await store.put(scope, "b", "second")
        self.assertIsInstance(caught.exception, agent_memory.MemoryError)
        self.assertEqual(caught.exception.quota, "max_records_per_user")
        self.assertEqual(caught.exception.limit, 1)
        self.assertIsNone(await store.get(scope, "b"))
        self.assertTrue(await store.delete(scope, "a"))
        await store.put(scope, "b", "second")

    async def test_zero_or_negative_quotas_are_invalid(self):
        for options in ({"max_records_per_user": 0}, {"max_bytes_per_user": -1}):
            with self.assertRaises(MemoryValidationError) as caught:
                InMemoryStore(**options)
            self.assertEqual(caught.exception.field, next(iter(options)))

    async def test_the_memory_url_takes_the_quota_parameters(self):
        store = agent_memory.open_store("memory:?max_bytes_per_user=10")
        await store.start()
        with self.assertRaises(MemoryQuotaError) as caught:
            await store.put(MemoryScope("app", "u"), "k", "far more than ten bytes")
        self.assertEqual((caught.exception.quota, caught.exception.limit), ("max_bytes_per_user", 10))


if __name__ == "__main__":
    unittest.main()
