"""Throwaway PostgreSQL and Redis servers for the Python tests.

A URL in ``AGENT_MEMORY_TEST_POSTGRES_URL`` / ``AGENT_MEMORY_TEST_REDIS_URL`` is used as it
is. Otherwise the servers come from the Rust testkit, through its helper binary
``agent-memory-test-servers`` (``AGENT_MEMORY_TEST_SERVERS`` names it; else
``debug/agent-memory-test-servers`` in cargo's target directory, as ``cargo metadata`` names
it, built with cargo when missing): the same fixtures,
free loopback ports, temporary directories and watchdogs as the Rust tests. A server that
cannot start fails the tests that need it, with the testkit's message; nothing is skipped.
"""

from __future__ import annotations

import atexit
import json
import os
import pathlib
import subprocess
import threading
from typing import Dict

ROOT = pathlib.Path(__file__).resolve().parents[2]
_ENV = {"postgres": "AGENT_MEMORY_TEST_POSTGRES_URL", "redis": "AGENT_MEMORY_TEST_REDIS_URL"}
_lock = threading.Lock()
_urls: Dict[str, str] = {}
_processes = []


def _helper() -> str:
    named = os.environ.get("AGENT_MEMORY_TEST_SERVERS")
    if named:
        return named
    path = cargo_target_dir() / "debug" / "agent-memory-test-servers"
    if not path.exists():
        subprocess.run(
            ["cargo", "build", "-q", "-p", "agent-memory-testkit", "--bin", path.name],
            cwd=ROOT,
            check=True,
        )
    return str(path)


def cargo_target_dir() -> pathlib.Path:
    """Where cargo builds: ``target/`` unless ``CARGO_TARGET_DIR`` or a cargo config moves it."""
    metadata = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    return pathlib.Path(json.loads(metadata)["target_directory"])


def _stop_all() -> None:
    for process in _processes:
        if process.stdin:
            process.stdin.close()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


atexit.register(_stop_all)


def url(name: str) -> str:
    """The URL of a server for this test process: ``postgres`` or ``redis``."""
    with _lock:
        if name in _urls:
            return _urls[name]
        given = os.environ.get(_ENV[name], "").strip()
        if given:
            _urls[name] = given
            return given
        process = subprocess.Popen(
            [_helper(), name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        _processes.append(process)
        line = process.stdout.readline().strip() if process.stdout else ""
        prefix = f"{name}="
        if not line.startswith(prefix):
            raise RuntimeError(
                f"could not start a throwaway {name} server (exit status {process.poll()}); "
                "see the message above, or set " + _ENV[name]
            )
        _urls[name] = line[len(prefix):]
        return _urls[name]
