"""The conformance mixin fails a store that breaks the contract, naming the broken rules."""

import unittest

from agent_memory.testing import CASE_NAMES, PYTHON_CASE_NAMES, ManualClock, MemoryStoreConformanceMixin

from reference_store import BrokenStore

# Cases the broken store must fail (it merges namespaces and searches without case), and
# cases it must still pass (the rest of what it does is right).
MUST_FAIL = ["namespaces_are_isolated", "search_is_case_sensitive_substring"]
MUST_PASS = ["put_then_get_round_trips", "users_are_isolated", "stale_revision_conflicts_and_changes_nothing"]


def run_mixin(cases):
    class BrokenStoreConformance(MemoryStoreConformanceMixin, unittest.IsolatedAsyncioTestCase):
        async def make_store(self):
            self.clock = ManualClock()
            return BrokenStore(self.clock)

    suite = unittest.TestSuite(BrokenStoreConformance(f"test_{name}") for name in cases)
    result = unittest.TestResult()
    suite.run(result)
    return result


class MixinCatchesBrokenStores(unittest.TestCase):
    def test_broken_rules_fail_and_the_rest_pass(self):
        result = run_mixin(MUST_FAIL + MUST_PASS)
        self.assertEqual(result.testsRun, len(MUST_FAIL) + len(MUST_PASS))
        self.assertEqual(result.errors, [], "no case may error: the failures must be assertions")
        failed = sorted(test._testMethodName for test, _ in result.failures)
        self.assertEqual(failed, sorted(f"test_{name}" for name in MUST_FAIL))
        for _, trace in result.failures:
            self.assertIn("AssertionError", trace)

    def test_every_core_case_is_a_test_method(self):
        names = {name for name in dir(MemoryStoreConformanceMixin) if name.startswith("test_")}
        self.assertEqual(
            names,
            {f"test_{name}" for name in CASE_NAMES}
            | {f"test_python_{name}" for name in PYTHON_CASE_NAMES},
        )
        self.assertGreater(len(CASE_NAMES), 90)


if __name__ == "__main__":
    unittest.main()
