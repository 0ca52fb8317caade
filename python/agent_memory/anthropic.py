"""Claude's memory tool for the Anthropic SDK's tool runner, kept in any agent-memory store.

``AgentMemoryTool`` is a ``BetaAsyncAbstractMemoryTool`` (package ``anthropic``, an optional
dependency imported by this module only) whose files live in a ``ScopedMemory``: one record
per file under ``/memories``, in SQLite, PostgreSQL, Redis or in-process, per user, shared by
every replica of a service, with real erasure. Each command runs the Rust core's memory-tool
dispatcher, the one the MCP server's ``--tools memory`` runs, so paths, limits, concurrent-edit
safety and every text the model reads are the same everywhere (see ``docs/memory-tool.md``).

    import anthropic
    from agent_memory import MemoryScope, ScopedMemory, SqliteMemoryStore
    from agent_memory.anthropic import AgentMemoryTool

    async def chat(user_id: str, prompt: str):
        async with SqliteMemoryStore("memories.db") as store:
            # The scope comes from your authenticated session, never from the model; a
            # namespace of its own keeps the files apart from the user's other memories.
            scope = MemoryScope("my-agent", user_id, "memory-tool")
            tool = AgentMemoryTool(ScopedMemory(store, scope))
            client = anthropic.AsyncAnthropic()
            runner = client.beta.messages.tool_runner(
                model="claude-sonnet-4-5",
                max_tokens=2048,
                tools=[tool],
                messages=[{"role": "user", "content": prompt}],
            )
            async for message in runner:
                print(message.content)

A command the core refuses (a path outside ``/memories``, a missing file, an ambiguous
``str_replace``, a full quota, a store failure) raises the SDK's ``ToolError`` with the core's
message, so the runner sends it back with ``"is_error": true``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from anthropic.lib.tools import BetaAsyncAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from ._stores import ScopedMemory

__all__ = ["AgentMemoryTool"]


class AgentMemoryTool(BetaAsyncAbstractMemoryTool):
    """Claude's memory tool (``memory_20250818``) over one user's ``ScopedMemory``.

    Pass it in ``tools=[...]`` of ``client.beta.messages.tool_runner(...)``, or call
    ``await tool.call(block.input)`` for each ``tool_use`` block named ``memory`` in a loop of
    your own. The handle's source (``ScopedMemory(..., source=...)``) is recorded on every file
    the model writes.
    """

    def __init__(
        self,
        memory: ScopedMemory,
        *,
        cache_control: Optional[BetaCacheControlEphemeralParam] = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self._memory = memory

    @property
    def memory(self) -> ScopedMemory:
        """The handle the files are kept in."""
        return self._memory

    async def call(self, input: object) -> str:
        """Runs one command as the model sent it (the ``tool_use`` block's ``input``).

        The core parses the raw input, so a malformed command gets the same answer as over MCP.
        """
        if not isinstance(input, Mapping):
            raise ToolError("the memory tool's input must be an object with a `command`")
        return await self._run(input)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """A directory listing two levels deep, or a file's numbered lines."""
        return await self._run(command.to_dict())

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """Creates or overwrites a file."""
        return await self._run(command.to_dict())

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """Replaces the one occurrence of ``old_str`` in a file."""
        return await self._run(command.to_dict())

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """Inserts text after line ``insert_line`` (0: at the top)."""
        return await self._run(command.to_dict())

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """Deletes a file or a directory with everything under it."""
        return await self._run(command.to_dict())

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """Moves a file or a directory."""
        return await self._run(command.to_dict())

    async def clear_all_memory(self) -> str:
        """Not offered: a model command never erases a user's store.

        Erase from trusted code instead: the store's ``delete_all(scope)`` for the handle's
        namespace, or ``delete_user`` for everything the user holds.
        """
        raise NotImplementedError(
            "AgentMemoryTool does not clear memory; erase with the store's delete_all or "
            "delete_user from trusted code"
        )

    async def _run(self, input: Mapping[str, Any]) -> str:
        text, is_error = await self._memory._native.memory_tool(dict(input))
        if is_error:
            raise ToolError(text)
        return text

    def __repr__(self) -> str:
        return f"AgentMemoryTool(scope={self._memory.scope!r})"
