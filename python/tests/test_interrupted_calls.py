"""No Python call may crash the interpreter: 200 processes abandon store calls mid-flight.

Agent frameworks cancel tasks on every timeout and interrupt, and programs exit with calls in
flight. Each run is one process of ``interrupted_calls.py``: a burst of 200 writes and reads
on the SQLite store, the in-process store or a pure-Python store behind the fact port, then
cancelled, ``sys.exit``-ed, its loop closed or its store dropped while the calls are pending.
Before the fix about one run in twenty-five died of SIGSEGV or of "Fatal Python error:
PyGILState_Release" at exit; every run must now exit with status 0.
"""

import concurrent.futures
import itertools
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
SCENARIOS = ("cancel", "exit", "close-loop", "drop-store")
STORES = ("sqlite", "memory", "python")
RUNS = 200
#: Processes at a time: the CI machine has two cores.
AT_ONCE = 4


def run_once(scenario: str, store: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as directory:
        return subprocess.run(
            [sys.executable, str(HERE / "interrupted_calls.py"), scenario, store, directory],
            cwd=HERE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )


class InterruptedCalls(unittest.TestCase):
    def test_abandoned_calls_never_crash_the_interpreter(self):
        # SQLite, whose calls really are pending when abandoned, gets half of the runs.
        plan = [
            (scenario, store)
            for scenario, store in itertools.product(SCENARIOS, STORES + ("sqlite",) * 3)
        ]
        runs = list(itertools.islice(itertools.cycle(plan), RUNS))
        with concurrent.futures.ThreadPoolExecutor(AT_ONCE) as pool:
            results = list(pool.map(lambda run: run_once(*run), runs))
        failures = [
            f"{scenario} on {store}: exit status {result.returncode}\n{result.stderr[-2000:]}"
            for (scenario, store), result in zip(runs, results)
            if result.returncode != 0
            or "Fatal Python error" in result.stderr
            or "panicked" in result.stderr
        ]
        self.assertEqual(
            failures, [], f"{len(failures)} of {RUNS} runs did not exit cleanly:\n" + "\n".join(failures[:3])
        )


if __name__ == "__main__":
    unittest.main()
