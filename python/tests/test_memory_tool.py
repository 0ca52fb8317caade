"""``agent_memory.anthropic.AgentMemoryTool`` under the real Anthropic SDK: the tool's
declaration, commands through the SDK's own entry points (``call`` with a raw input and
``execute`` with the SDK's typed command), errors as the SDK's ``ToolError``, and the same
texts as the SDK's reference filesystem tool on one session of commands."""

import tempfile
import unittest
from typing import Any, Dict, List

from anthropic._models import construct_type_unchecked
from anthropic.lib.tools import ToolError
from anthropic.tools import BetaAsyncLocalFilesystemMemoryTool
from anthropic.types.beta import BetaMemoryTool20250818Command

from agent_memory import (
    InMemoryStore,
    MemoryScope,
    MemorySource,
    ScopedMemory,
    SqliteMemoryStore,
)
from agent_memory.anthropic import AgentMemoryTool

# One session a model could run: create, view, edit, insert, rename, delete, and mistakes.
SESSION: List[Dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/prefs.md", "file_text": "units: metric\nname: Sam\n"},
    {"command": "create", "path": "/memories/projects/atlas.md", "file_text": "due friday\n"},
    {"command": "view", "path": "/memories"},
    {"command": "view", "path": "/memories/prefs.md"},
    {"command": "view", "path": "/memories/prefs.md", "view_range": [2, 2]},
    {"command": "str_replace", "path": "/memories/prefs.md", "old_str": "metric", "new_str": "SI"},
    {"command": "str_replace", "path": "/memories/prefs.md", "old_str": "absent", "new_str": "x"},
    {"command": "insert", "path": "/memories/prefs.md", "insert_line": 0, "insert_text": "# me\n"},
    {"command": "insert", "path": "/memories/prefs.md", "insert_line": 99, "insert_text": "x\n"},
    {"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/work"},
    {"command": "view", "path": "/memories/work/atlas.md"},
    {"command": "view", "path": "/memories/projects/atlas.md"},
    {"command": "delete", "path": "/memories/work"},
    {"command": "view", "path": "/etc/passwd"},
    {"command": "view", "path": "/memories"},
]


async def outcome(tool, command):
    try:
        return ("ok", await tool.call(command))
    except ToolError as error:
        return ("error", str(error))


class AgentMemoryToolTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.store = InMemoryStore()
        await self.store.start()
        scope = MemoryScope("app", "user-1", "memory-tool")
        self.memory = ScopedMemory(self.store, scope, source=MemorySource(agent="claude"))
        self.tool = AgentMemoryTool(self.memory)

    async def asyncTearDown(self):
        await self.store.close()

    def test_declares_the_builtin_tool(self):
        self.assertEqual(self.tool.to_dict(), {"type": "memory_20250818", "name": "memory"})
        self.assertEqual(self.tool.name, "memory")
        cached = AgentMemoryTool(self.memory, cache_control={"type": "ephemeral"})
        self.assertEqual(cached.to_dict()["cache_control"], {"type": "ephemeral"})

    async def test_files_are_records_of_the_handle_with_its_source(self):
        await self.tool.call(
            {"command": "create", "path": "/memories/a.txt", "file_text": "hello"}
        )
        page = await self.memory.list()
        self.assertEqual(len(page.items), 1)
        self.assertEqual(page.items[0].content, "hello")
        self.assertEqual(page.items[0].source.agent, "claude")
        other = ScopedMemory(self.store, MemoryScope("app", "user-2", "memory-tool"))
        self.assertIn("does not exist", str(await outcome(AgentMemoryTool(other), {
            "command": "view", "path": "/memories/a.txt"})))

    async def test_typed_commands_run_through_execute(self):
        command = construct_type_unchecked(
            value={"command": "create", "path": "/memories/t.md", "file_text": "typed"},
            type_=BetaMemoryTool20250818Command,
        )
        self.assertIn("/memories/t.md", await self.tool.execute(command))
        view = construct_type_unchecked(
            value={"command": "view", "path": "/memories/t.md"},
            type_=BetaMemoryTool20250818Command,
        )
        self.assertIn("typed", await self.tool.execute(view))

    async def test_refusals_are_tool_errors(self):
        with self.assertRaises(ToolError):
            await self.tool.call({"command": "view", "path": "/memories/missing.md"})
        with self.assertRaises(ToolError):
            await self.tool.call({"command": "launch"})
        with self.assertRaises(ToolError):
            await self.tool.call("not an object")
        with self.assertRaises(NotImplementedError):
            await self.tool.clear_all_memory()

    async def test_same_texts_as_the_sdks_filesystem_tool(self):
        with tempfile.TemporaryDirectory() as base:
            sqlite = SqliteMemoryStore(f"{base}/memories.db")
            await sqlite.start()
            for store in (self.store, sqlite):
                ours = AgentMemoryTool(ScopedMemory(store, MemoryScope("app", "u", "memory-tool")))
                reference = BetaAsyncLocalFilesystemMemoryTool(base_path=tempfile.mkdtemp(dir=base))
                for command in SESSION:
                    expected, got = await outcome(reference, command), await outcome(ours, command)
                    self.assertEqual(got[0], expected[0], command)
                    if command["command"] == "view" and command["path"] == "/memories":
                        # Directory listings differ only in the sizes shown (see D-notes in
                        # docs/memory-tool.md); compare the paths listed.
                        self.assertEqual(paths(got[1]), paths(expected[1]), command)
                    else:
                        self.assertEqual(got[1], expected[1], command)
            await sqlite.close()


def paths(listing: str) -> List[str]:
    return [line.split("\t")[-1] for line in listing.splitlines() if "\t" in line]


if __name__ == "__main__":
    unittest.main()
