"""One process that abandons store calls mid-flight, for ``test_interrupted_calls``.

    python interrupted_calls.py SCENARIO STORE DIRECTORY

STORE is ``sqlite`` (the file ``DIRECTORY/memories.db``), ``memory`` or ``python`` (the
pure-Python reference store behind the fact port, so the core calls back into Python from
its own threads). Each SCENARIO starts a burst of writes and reads, lets them get under way,
then walks away from them the way a real program does:

- ``cancel``: cancels every task (a timeout, an interrupt), then returns;
- ``exit``: calls ``sys.exit(0)`` with the calls in flight;
- ``close-loop``: closes the event loop by hand while calls are pending, then lingers so their
  answers arrive at the closed loop;
- ``drop-store``: drops the last reference to the store and collects garbage mid-call, then
  cancels and returns.

The process must exit with status 0 whatever the timing: no signal, no "Fatal Python error".
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time

from agent_memory import Facts, InMemoryStore, MemoryScope, SqliteMemoryStore

from reference_store import DictStore

CALLS = 200


def make_store(kind: str, directory: str):
    if kind == "sqlite":
        return SqliteMemoryStore(f"{directory}/memories.db")
    if kind == "memory":
        return InMemoryStore()
    return DictStore()


def burst(kind: str, store) -> list:
    """Starts the calls as tasks; every other one a write."""
    scope = MemoryScope("app", "u")
    if kind == "python":
        facts = Facts(store)
        calls = [
            facts.remember("app", "u", "x" * 1000) if i % 2 else facts.recall("app", "u", limit=5)
            for i in range(CALLS)
        ]
    else:
        calls = [
            store.put(scope, f"k{i}", "x" * 1000) if i % 2 else store.get(scope, f"k{i - 1}")
            for i in range(CALLS)
        ]
    return [asyncio.ensure_future(call) for call in calls]


async def scenario(name: str, kind: str, directory: str) -> None:
    store = make_store(kind, directory)
    await store.start()
    tasks = burst(kind, store)
    await asyncio.sleep(0.001)
    if name == "exit":
        sys.exit(0)
    if name == "drop-store":
        del store
        gc.collect()
    for task in tasks:
        task.cancel()


def close_loop(kind: str, directory: str) -> None:
    loop = asyncio.new_event_loop()
    store = make_store(kind, directory)
    loop.run_until_complete(store.start())
    tasks = burst(kind, store)
    loop.run_until_complete(asyncio.sleep(0.001))
    loop.close()
    del tasks
    # The answers of the pending calls now arrive at a closed loop.
    time.sleep(0.05)


def main() -> None:
    name, kind, directory = sys.argv[1:4]
    if name == "close-loop":
        close_loop(kind, directory)
    else:
        asyncio.run(scenario(name, kind, directory))


if __name__ == "__main__":
    main()
