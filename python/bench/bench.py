"""Python calls per second on the in-process and SQLite stores, beside the Rust core's own
figures from the same process and the same store (one run, so the ratios compare like with
like).

Build the package in release mode first, then run:

    maturin develop --release -m python/Cargo.toml
    python python/bench/bench.py [--ops 200000]

For each store it loads 1,000 records of one user, then measures ``get`` and ``put`` (an
unconditional replace of one of those keys) from 1 and from 16 concurrent asyncio tasks, and
the same loop run by the core on tokio tasks (``_native._bench_core``). Each figure is the
median of three rounds. ``uptime``'s load average is printed before and after.
"""

import argparse
import asyncio
import os
import statistics
import tempfile
import time

from agent_memory import InMemoryStore, MemoryScope, SqliteMemoryStore, _native

KEYS = 1000
ROUNDS = 3


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


async def python_rate(store, scope, op: str, tasks: int, ops: int) -> float:
    keys = [f"key-{i}" for i in range(KEYS)]
    per_task = ops // tasks

    async def worker(t: int) -> None:
        if op == "get":
            get = store.get
            for i in range(per_task):
                await get(scope, keys[(t * per_task + i) % KEYS])
        else:
            put = store.put
            for i in range(per_task):
                await put(scope, keys[(t * per_task + i) % KEYS], "a benchmark value")

    started = time.perf_counter()
    if tasks == 1:
        await worker(0)
    else:
        await asyncio.gather(*(worker(t) for t in range(tasks)))
    return per_task * tasks / (time.perf_counter() - started)


async def rust_rate(store, scope, op: str, tasks: int, ops: int) -> float:
    micros = await _native._bench_core(store._native, scope, op, tasks, ops, KEYS)
    return (ops // tasks) * tasks / (micros / 1e6)


async def measure(name: str, store, ops: int) -> None:
    scope = MemoryScope("bench", "user-1")
    async with store:
        for i in range(KEYS):
            await store.put(scope, f"key-{i}", "a benchmark value")
        for op in ("get", "put"):
            for tasks in (1, 16):
                py = statistics.median([await python_rate(store, scope, op, tasks, ops) for _ in range(ROUNDS)])
                rs = statistics.median([await rust_rate(store, scope, op, tasks, ops) for _ in range(ROUNDS)])
                print(f"| {name} | {op} | {tasks} | {py:,.0f} | {rs:,.0f} | {py / rs:.2f} |", flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200_000, help="calls per figure on the in-process store")
    parser.add_argument("--sqlite-ops", type=int, default=20_000, help="calls per figure on SQLite")
    args = parser.parse_args()
    print(f"before: {load()}")
    print("| store | op | tasks | Python calls/s | Rust calls/s | Python/Rust |")
    print("| --- | --- | --- | --- | --- | --- |")
    await measure("memory", InMemoryStore(), args.ops)
    with tempfile.TemporaryDirectory() as directory:
        await measure("sqlite", SqliteMemoryStore(os.path.join(directory, "bench.db")), args.sqlite_ops)
    print(f"after: {load()}")


if __name__ == "__main__":
    asyncio.run(main())
