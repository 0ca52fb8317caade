"""Runs the package's tests: five groups of test modules in parallel processes (the server
suites spend most of their time waiting for real expiries, the stress test on its child
processes), then prints each group's output and one closing line, ``python: N passed,
N failed``. Exits 1 when a test failed.

    python python/tests/run.py            # what scripts/test runs
    python -m unittest discover -s python/tests   # the same tests, one after another
"""

import pathlib
import re
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
GROUPS = [
    ["test_api", "test_broken_store", "test_conformance_local", "test_memory_tool", "test_quotas",
     "test_review_link"],
    ["test_conformance_postgres"],
    ["test_conformance_redis"],
    # The LangGraph store (with LangMem and deepagents on it) and the ADK memory service, on
    # every provider, and the examples of docs/frameworks.md.
    ["test_frameworks_langgraph", "test_frameworks_adk", "test_frameworks_docs"],
    ["test_interrupted_calls"],
]


def main() -> int:
    started = time.monotonic()
    running = [
        (group, subprocess.Popen([sys.executable, "-m", "unittest", *group], cwd=HERE,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        for group in GROUPS
    ]
    passed = failed = 0
    for group, process in running:
        output, _ = process.communicate()
        ran = re.search(r"^Ran (\d+) tests?", output, re.MULTILINE)
        bad = sum(int(n) for n in re.findall(r"(?:failures|errors)=(\d+)", output))
        total = int(ran.group(1)) if ran else 0
        if process.returncode != 0 and bad == 0:
            bad = max(1, total)  # the run itself failed (an import error, a crash)
        passed += total - min(bad, total)
        failed += bad
        print(f"--- python tests: {' '.join(group)} (exit {process.returncode})")
        print(output.rstrip())
    print(f"--- python tests took {time.monotonic() - started:.0f} s")
    print(f"python: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
