"""The private event loop thread of the LangGraph adapter (``agent_memory.langgraph``): where
its sync methods run coroutines, from any thread, with or without an event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from typing import Awaitable, Optional, TypeVar

_T = TypeVar("_T")


class LoopThread:
    """A private event loop on a daemon thread: where the sync methods run coroutines (the
    native futures need a running loop in the calling thread, which a worker thread lacks)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None

    def run(self, coroutine: Awaitable[_T]) -> _T:
        loop = self._start()
        if threading.current_thread() is self._thread:
            coroutine.close()  # type: ignore[attr-defined]
            raise RuntimeError("a sync method of AgentMemoryStore was called from its own loop")
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()  # type: ignore[arg-type]

    def submit(self, coroutine: Awaitable[_T]) -> "concurrent.futures.Future[_T]":
        return asyncio.run_coroutine_threadsafe(coroutine, self._start())  # type: ignore[arg-type]

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_run_forever, args=(loop,), name="agent-memory-langgraph", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
                # At interpreter exit (or when the adapter is collected) the loop stops, so
                # nothing waits on a thread that no one will join.
                weakref.finalize(self, _stop_loop, loop, thread)
            return self._loop

    def stop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            _stop_loop(loop, thread)


def _run_forever(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()


async def _drain() -> None:
    """Cancel what still runs on the private loop (a sweeper), let it finish, then stop."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    asyncio.get_running_loop().stop()


def _stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    if loop.is_closed():
        return
    try:
        asyncio.run_coroutine_threadsafe(_drain(), loop)
    except RuntimeError:
        return  # closed meanwhile
    if thread is not threading.current_thread():
        thread.join(timeout=5)
