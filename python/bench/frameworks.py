"""``aget``, ``aput`` and ``asearch`` through ``agent_memory.langgraph.AgentMemoryStore`` beside
LangGraph's own stores, in one run on one machine (so the ratios compare like with like).

    maturin develop --release -m python/Cargo.toml
    pip install "langgraph-checkpoint-sqlite>=3,<4" "langgraph-checkpoint-postgres>=3,<4" "psycopg[binary]>=3.2,<4"
    python python/bench/frameworks.py [--ops 2000] [--postgres postgresql://…]

Pairs: the adapter on ``InMemoryStore`` against LangGraph's ``InMemoryStore``; on
``SqliteMemoryStore`` against ``AsyncSqliteStore``; with ``--postgres`` (a throwaway database:
both create tables in it), on ``PostgresMemoryStore`` against ``AsyncPostgresStore``. Each
store holds 1,000 items of one user (``("bench", "user-1")``, values ``{"text", "n",
"group"}``); then one asyncio task measures ``aget`` of those keys, ``aput`` replacing them,
``asearch`` of the namespace's first 10 items, and ``asearch`` with ``filter={"group": 7}`` (10
of the 1,000 match). Each figure is the median of three rounds; ratio is adapter / LangGraph
(above 1: the adapter is faster). ``uptime``'s load average is printed before and after.
"""

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

from agent_memory import InMemoryStore, PostgresMemoryStore, SqliteMemoryStore
from agent_memory.langgraph import AgentMemoryStore

ITEMS = 1000
ROUNDS = 3
NAMESPACE = ("bench", "user-1")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def value(n: int) -> dict:
    return {"text": f"benchmark value {n}", "n": n, "group": n % 100}


async def rate(store, op: str, ops: int) -> float:
    keys = [f"key-{n:04d}" for n in range(ITEMS)]
    started = time.perf_counter()
    if op == "aget":
        for i in range(ops):
            await store.aget(NAMESPACE, keys[i % ITEMS])
    elif op == "aput":
        for i in range(ops):
            await store.aput(NAMESPACE, keys[i % ITEMS], value(i % ITEMS))
    elif op == "asearch":
        for _ in range(ops):
            await store.asearch(NAMESPACE, limit=10)
    else:
        for _ in range(ops):
            await store.asearch(NAMESPACE, filter={"group": 7}, limit=10)
    return ops / (time.perf_counter() - started)


async def figures(store, ops: int) -> dict:
    for n in range(ITEMS):
        await store.aput(NAMESPACE, f"key-{n:04d}", value(n))
    result = {}
    for op, count in (("aget", ops), ("aput", ops), ("asearch", ops), ("asearch filter", max(ops // 10, 20))):
        result[op] = statistics.median([await rate(store, op, count) for _ in range(ROUNDS)])
    return result


def report(name: str, ours: dict, theirs: dict) -> None:
    for op in ours:
        print(
            f"| {name} | {op} | {ours[op]:,.0f} | {theirs[op]:,.0f} | {ours[op] / theirs[op]:.2f} |",
            flush=True,
        )


async def memory_pair(ops: int) -> None:
    from langgraph.store.memory import InMemoryStore as LangGraphMemory

    async with AgentMemoryStore(InMemoryStore(), application_id="bench", user_at=1) as ours:
        mine = await figures(ours, ops)
    report("in-process vs InMemoryStore", mine, await figures(LangGraphMemory(), ops))


async def sqlite_pair(ops: int) -> None:
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    with tempfile.TemporaryDirectory() as directory:
        store = SqliteMemoryStore(os.path.join(directory, "ours.db"))
        async with AgentMemoryStore(store, application_id="bench", user_at=1) as ours:
            mine = await figures(ours, ops)
        async with AsyncSqliteStore.from_conn_string(os.path.join(directory, "theirs.db")) as theirs:
            await theirs.setup()
            report("SQLite vs AsyncSqliteStore", mine, await figures(theirs, ops))


async def postgres_pair(url: str, ops: int) -> None:
    from langgraph.store.postgres.aio import AsyncPostgresStore

    store = PostgresMemoryStore(url, pool_options={"min_size": 1, "max_size": 4})
    async with AgentMemoryStore(store, application_id="bench", user_at=1) as ours:
        await ours.adelete_namespace(NAMESPACE)
        mine = await figures(ours, ops)
    async with AsyncPostgresStore.from_conn_string(url) as theirs:
        await theirs.setup()
        report("PostgreSQL vs AsyncPostgresStore", mine, await figures(theirs, ops))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000, help="calls per figure")
    parser.add_argument("--postgres", help="a throwaway PostgreSQL database URL for the third pair")
    args = parser.parse_args()
    print(f"before: {load()}")
    print("| pair | op | adapter calls/s | LangGraph calls/s | adapter / LangGraph |")
    print("| --- | --- | --- | --- | --- |")
    await memory_pair(args.ops)
    await sqlite_pair(args.ops)
    if args.postgres:
        await postgres_pair(args.postgres, args.ops)
    else:
        print("(no --postgres: the PostgreSQL pair is left out)", file=sys.stderr)
    print(f"after: {load()}")


if __name__ == "__main__":
    asyncio.run(main())
