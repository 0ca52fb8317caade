"""End-to-end client for `agent-memory mcp`, written against the official MCP Python SDK.

Run by crates/agent-memory-cli/tests/mcp.rs as

    python mcp_client.py BINARY STORE_URL APP

It starts the built binary as a stdio MCP server (several times, for different bound users
sharing one store), drives it the way an MCP client application would, and exits non-zero with
a message on the first broken expectation. Nothing here talks to the store directly: every
check goes through a real MCP session.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError

KEY_TOOLS = {"memory_save", "memory_get", "memory_list", "memory_search", "memory_delete"}
MEMORY_COMMANDS = ["view", "create", "str_replace", "insert", "delete", "rename"]
FACT_TOOLS = {"remember", "forget", "recall"}
SCOPE_WORDS = ("user", "app", "namespace", "tenant", "scope")


def check(condition, message):
    if not condition:
        raise AssertionError(message)


class Calls:
    """Tool calls on an initialized session (`self.session`), checked, with failures naming
    `self.label`."""

    async def ok(self, tool, arguments):
        result = await self.session.call_tool(tool, arguments)
        text = result.content[0].text if result.content else ""
        check(not result.isError, f"[{self.label}] {tool}({arguments}) failed: {text}")
        data = result.structuredContent
        check(isinstance(data, dict), f"[{self.label}] {tool}: no structured result")
        check(json.loads(text) == data, f"[{self.label}] {tool}: text and structured differ")
        return data

    async def text(self, tool, arguments):
        """A successful call whose result is one text block (the memory tool's)."""
        result = await self.session.call_tool(tool, arguments)
        text = result.content[0].text if result.content else ""
        check(not result.isError, f"[{self.label}] {tool}({arguments}) failed: {text}")
        check(len(result.content) == 1 and result.content[0].type == "text", "one text block")
        return text

    async def error(self, tool, arguments):
        result = await self.session.call_tool(tool, arguments)
        check(result.isError, f"[{self.label}] {tool}({arguments}) should fail: {result}")
        check(result.content and result.content[0].type == "text", "error has a text message")
        return result.content[0].text


class Server(Calls):
    """One server process bound to one scope, with an initialized client session."""

    def __init__(self, binary, store, app, user, namespace=None, tools=None):
        args = ["--store", store, "--app", app, "--user", user]
        if namespace is not None:
            args += ["--namespace", namespace]
        args.append("mcp")
        if tools is not None:
            args += ["--tools", tools]
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
        env["RUST_LOG"] = os.environ.get("RUST_LOG", "warn")
        self.params = StdioServerParameters(command=binary, args=args, env=env)
        self.label = f"{user}/{namespace or '-'}/{tools or 'keys'}"

    async def __aenter__(self):
        self._transport = stdio_client(self.params)
        read, write = await self._transport.__aenter__()
        self._session_cm = ClientSession(read, write)
        self.session = await self._session_cm.__aenter__()
        self.init = await self.session.initialize()
        return self

    async def __aexit__(self, *exc):
        await self._session_cm.__aexit__(*exc)
        await self._transport.__aexit__(*exc)


async def all_keys(server, tool, extra, limit):
    """Pages through list or search with small pages; returns the keys and the page count."""
    keys, cursor, pages = [], None, 0
    while True:
        args = dict(extra, limit=limit)
        if cursor is not None:
            args["cursor"] = cursor
        page = await server.ok(tool, args)
        check(len(page["items"]) <= limit, f"{tool}: page larger than limit")
        keys += [item["key"] for item in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            return keys, pages
        check(pages < 50, f"{tool}: cursors never end")


async def key_tools_scenario(binary, store, app):
    async with Server(binary, store, app, "alice") as alice:
        # initialize
        info = alice.init
        check(info.serverInfo.name == "agent-memory", f"server name: {info.serverInfo}")
        check(info.capabilities.tools is not None, "tools capability advertised")

        # list tools: exactly the five, closed schemas, no scope fields, truthful annotations
        tools = {tool.name: tool for tool in (await alice.session.list_tools()).tools}
        check(set(tools) == KEY_TOOLS, f"tool names: {sorted(tools)}")
        for tool in tools.values():
            schema = tool.inputSchema
            check(schema.get("type") == "object", f"{tool.name}: object schema")
            check(schema.get("additionalProperties") is False, f"{tool.name}: closed schema")
            for prop in schema.get("properties", {}):
                check(not any(w in prop.lower() for w in SCOPE_WORDS), f"{tool.name}.{prop}")
            check(tool.description and "only what the user" in tools["memory_save"].description,
                  "save description limits saving to what the user asks")
            ann = tool.annotations
            check(ann is not None, f"{tool.name}: annotations")
            check(ann.openWorldHint is False, f"{tool.name}: closed world")
        for name in ("memory_get", "memory_list", "memory_search"):
            ann = tools[name].annotations
            check(ann.readOnlyHint is True and ann.idempotentHint is True, f"{name}: read-only")
        for name in ("memory_save", "memory_delete"):
            ann = tools[name].annotations
            check(ann.readOnlyHint is False and ann.destructiveHint is True, f"{name}: destructive")
        check(tools["memory_delete"].annotations.idempotentHint is True, "delete idempotent")
        check(tools["memory_save"].annotations.idempotentHint is False, "save not idempotent")
        check(set(tools["memory_save"].inputSchema["required"]) == {"key", "content"}, "required")

        # save
        saved = await alice.ok("memory_save", {
            "key": "report-format",
            "content": "Start with an executive summary.",
            "metadata": {"category": "preferences"},
        })
        record = saved["memory"]
        check(saved["saved"] is True and record["key"] == "report-format", f"save: {saved}")
        check(isinstance(record["revision"], str), "revision is a string")
        check(isinstance(record["created_at"], (int, float)) and record["created_at"] > 1e9,
              "timestamps are epoch seconds")
        check(record["expires_at"] is None, "no expiry unless asked")
        check(set(record) == {"key", "content", "metadata", "revision", "created_at",
                              "updated_at", "expires_at"}, f"record fields: {sorted(record)}")
        for i in range(1, 6):
            await alice.ok("memory_save", {"key": f"note-{i}", "content": f"needle number {i}"})
        temp = await alice.ok("memory_save", {"key": "temporary", "content": "short-lived",
                                              "expires_in_seconds": 3600})
        check(temp["memory"]["expires_at"] - temp["memory"]["created_at"] > 3500, "expiry set")

        # get
        got = await alice.ok("memory_get", {"key": "report-format"})
        check(got["found"] is True, "get finds the record")
        check(got["memory"]["content"] == "Start with an executive summary.", "content round trip")
        check(got["memory"]["metadata"] == {"category": "preferences"}, "metadata round trip")
        check(got["memory"]["revision"] == record["revision"], "same revision")
        check("not instructions" in got["note"], "results say stored content is data")
        missing = await alice.ok("memory_get", {"key": "never-saved"})
        check(missing["found"] is False and missing["memory"] is None, "missing key")

        # search, paging with cursors
        keys, pages = await all_keys(alice, "memory_search", {"query": "needle"}, 2)
        check(keys == [f"note-{i}" for i in range(1, 6)], f"search keys: {keys}")
        check(pages >= 3, f"search used cursors: {pages} pages")
        none = await alice.ok("memory_search", {"query": "NEEDLE"})
        check(none["items"] == [], "search is case-sensitive")

        # list with cursors
        keys, pages = await all_keys(alice, "memory_list", {}, 2)
        expected = sorted(["report-format", "temporary"] + [f"note-{i}" for i in range(1, 6)])
        check(keys == expected, f"list keys: {keys}")
        check(pages >= 4, f"list used cursors: {pages} pages")

        # conditional write: a stale revision is a tool error the model can act on
        updated = await alice.ok("memory_save", {"key": "report-format", "content": "Bullets.",
                                                 "expected_revision": record["revision"]})
        stale = await alice.error("memory_save", {"key": "report-format", "content": "Late.",
                                                  "expected_revision": record["revision"]})
        check("revision is stale" in stale and "memory_get" in stale, f"stale message: {stale}")
        got = await alice.ok("memory_get", {"key": "report-format"})
        check(got["memory"]["content"] == "Bullets.", "stale write changed nothing")
        check(got["memory"]["revision"] == updated["memory"]["revision"], "revision kept")

        # delete
        deleted = await alice.ok("memory_delete", {"key": "note-5"})
        check(deleted["deleted"] is True, "delete reports the removal")
        again = await alice.ok("memory_delete", {"key": "note-5"})
        check(again["deleted"] is False, "second delete finds nothing")
        check((await alice.ok("memory_get", {"key": "note-5"}))["found"] is False, "gone")

        # bad arguments: tool errors naming the field and the limit, not protocol failures
        msg = await alice.error("memory_list", {"limit": 0})
        check("`limit`" in msg and "1 to 100" in msg, f"limit message: {msg}")
        msg = await alice.error("memory_save", {"key": "k"})
        check("`content`" in msg, f"missing content message: {msg}")
        msg = await alice.error("memory_save", {"key": "x" * 300, "content": "c"})
        check("`key`" in msg and "256 bytes" in msg, f"key limit message: {msg}")
        msg = await alice.error("memory_save", {"key": "k", "content": "c",
                                                "expires_in_seconds": -1})
        check("`expires_in_seconds`" in msg, f"expiry message: {msg}")
        msg = await alice.error("memory_list", {"cursor": "forged-cursor"})
        check("`cursor`" in msg, f"cursor message: {msg}")

        # smuggling another scope through arguments is refused and changes nothing
        smuggles = [
            ("memory_save", {"key": "planted", "content": "from alice", "user_id": "bob"}),
            ("memory_save", {"key": "planted", "content": "x", "application_id": "other-app"}),
            ("memory_save", {"key": "planted", "content": "x", "namespace": "facts"}),
            ("memory_get", {"key": "report-format", "user_id": "bob"}),
            ("memory_list", {"user_id": "bob", "application_id": app}),
            ("memory_search", {"query": "needle", "user": "bob"}),
            ("memory_delete", {"key": "report-format", "user_id": "bob"}),
        ]
        for tool, args in smuggles:
            msg = await alice.error(tool, args)
            check("does not accept" in msg and "fixed by the application" in msg,
                  f"{tool} smuggle message: {msg}")
        check((await alice.ok("memory_get", {"key": "planted"}))["found"] is False,
              "a rejected call wrote nothing")
        check((await alice.ok("memory_get", {"key": "report-format"}))["found"] is True,
              "a rejected delete deleted nothing")

        # an unknown tool is a protocol error, not a silent success
        try:
            await alice.session.call_tool("memory_delete_all", {})
        except McpError as err:
            check("unknown tool" in str(err), f"unknown tool error: {err}")
        else:
            raise AssertionError("unknown tool accepted")

        alice_keys, _ = await all_keys(alice, "memory_list", {}, 100)

    # A second process bound to another user of the same application, on the same store,
    # sees none of alice's memories, and nothing the smuggling calls named was created.
    async with Server(binary, store, app, "bob") as bob:
        listed = await bob.ok("memory_list", {})
        check(listed["items"] == [], f"bob sees nothing: {listed['items']}")
        for key in ("planted", "report-format", "note-1"):
            check((await bob.ok("memory_get", {"key": key}))["found"] is False, f"bob: {key}")
        check((await bob.ok("memory_search", {"query": "needle"}))["items"] == [], "bob search")
        check((await bob.ok("memory_delete", {"key": "report-format"}))["deleted"] is False,
              "bob cannot delete alice's memory")
        await bob.ok("memory_save", {"key": "report-format", "content": "bob's own"})

    # Alice's application on another app id, and alice's other namespace, are empty too.
    async with Server(binary, store, "other-app", "alice") as other_app:
        check((await other_app.ok("memory_list", {}))["items"] == [], "other app sees nothing")
    async with Server(binary, store, app, "alice", namespace="facts") as other_ns:
        check((await other_ns.ok("memory_list", {}))["items"] == [], "other namespace empty")

    # Alice again, in a fresh process: exactly what she saved, untouched by bob.
    async with Server(binary, store, app, "alice") as alice:
        keys, _ = await all_keys(alice, "memory_list", {}, 100)
        check(keys == alice_keys, f"alice after restart: {keys}")
        got = await alice.ok("memory_get", {"key": "report-format"})
        check(got["memory"]["content"] == "Bullets.", "bob's write stayed in bob's scope")


def page_keys(page):
    return [item["key"] for item in page["items"]]


async def search_options(client):
    """memory_search's `match` and `ignore_case`, and the `metadata` filter of memory_list and
    memory_search, on a fresh scope. `client` is a `Server` here or tests/mcp_http_client.py's
    `Client` (anything with `ok`, `error` and `session`)."""
    tools = {tool.name: tool for tool in (await client.session.list_tools()).tools}
    search = tools["memory_search"]
    props = search.inputSchema["properties"]
    check(props["match"]["type"] == "string" and "all_words" in props["match"]["description"],
          f"match is declared: {props}")
    check(props["ignore_case"]["type"] == "boolean", f"ignore_case is declared: {props}")
    check(props["metadata"]["type"] == "object", f"search metadata is declared: {props}")
    check(search.inputSchema["required"] == ["query"], "the new arguments are optional")
    check(tools["memory_list"].inputSchema["properties"]["metadata"]["type"] == "object",
          "list metadata is declared")
    check("If a phrase search finds nothing" in search.description, search.description)

    for key, content, metadata in [
        ("units", "Reports in metric units", {"category": "preferences", "pinned": True}),
        ("warehouse", "prefers the Berlin warehouse", {"category": "preferences"}),
        ("ticket", "Ticket 7 is about the Warehouse in Hamburg", {"category": "support"}),
        ("weight", "weighs 1 unit", {"rank": 1.0}),
    ]:
        await client.ok("memory_save", {"key": key, "content": content, "metadata": metadata})

    async def found(tool, arguments):
        return page_keys(await client.ok(tool, arguments))

    # The default is unchanged: one case-sensitive phrase.
    check(await found("memory_search", {"query": "berlin warehouse"}) == [], "phrase by default")
    words = {"query": "berlin warehouse", "match": "all_words", "ignore_case": True}
    check(await found("memory_search", words) == ["warehouse"], "all_words, any case")
    sensitive = {"query": "berlin warehouse", "match": "all_words", "ignore_case": False}
    check(await found("memory_search", sensitive) == [], "all_words is still case-sensitive")
    any_word = {"query": "WAREHOUSE metric", "match": "any_word", "ignore_case": True}
    check(await found("memory_search", any_word) == ["ticket", "units", "warehouse"], "any_word")
    check(await found("memory_search", {"query": "BERLIN", "ignore_case": True}) == ["warehouse"],
          "a phrase in any case")

    # Metadata: equality on top-level fields, all of which must hold; 1 equals 1.0.
    check(await found("memory_list", {"metadata": {"category": "preferences"}})
          == ["units", "warehouse"], "list by category")
    both = {"metadata": {"category": "preferences", "pinned": True}}
    check(await found("memory_list", both) == ["units"], "list by two fields")
    check(await found("memory_list", {"metadata": {"rank": 1}}) == ["weight"], "numbers")
    by_meta = {"query": "warehouse", "ignore_case": True, "metadata": {"category": "support"}}
    check(await found("memory_search", by_meta) == ["ticket"], "search by metadata")

    # Pages of one page each: the options go with every call, and the cursors continue.
    async def every_page(tool, arguments):
        keys, cursor = [], None
        for _ in range(20):
            page = await client.ok(tool, dict(arguments, limit=1, cursor=cursor))
            keys += page_keys(page)
            cursor = page["next_cursor"]
            if cursor is None:
                return keys, page
        raise AssertionError(f"{tool}: cursors never end")

    paged = {"query": "warehouse unit", "match": "any_word", "ignore_case": True}
    keys, _ = await every_page("memory_search", paged)
    check(keys == ["ticket", "units", "warehouse", "weight"], f"paged word search: {keys}")
    keys, _ = await every_page("memory_list", {"metadata": {"category": "preferences"}})
    check(keys == ["units", "warehouse"], f"paged metadata list: {keys}")
    first = await client.ok("memory_search", dict(paged, limit=1))
    msg = await client.error("memory_search", dict(paged, match="all_words",
                                                   cursor=first["next_cursor"]))
    check("`cursor`" in msg, f"a cursor continues only its own options: {msg}")

    # Bad values are tool errors naming the argument.
    msg = await client.error("memory_search", {"query": "q", "match": "fuzzy"})
    check("`match`" in msg and "all_words" in msg, f"match message: {msg}")
    msg = await client.error("memory_search", {"query": "q", "ignore_case": "yes"})
    check("`ignore_case`" in msg, f"ignore_case message: {msg}")
    msg = await client.error("memory_list", {"metadata": {"tags": ["private-tag"]}})
    check("`metadata`" in msg and "private-tag" not in msg, f"metadata message: {msg}")
    msg = await client.error("memory_list", {"match": "all_words"})
    check("does not accept" in msg, f"list takes no match: {msg}")


async def search_options_scenario(binary, store, app):
    async with Server(binary, store, app, "gina", namespace="search") as gina:
        await search_options(gina)


async def fact_tools_scenario(binary, store, app):
    async with Server(binary, store, app, "carol", namespace="facts", tools="facts") as carol:
        tools = {tool.name: tool for tool in (await carol.session.list_tools()).tools}
        check(set(tools) == FACT_TOOLS, f"fact tool names: {sorted(tools)}")
        check(tools["recall"].annotations.readOnlyHint is True, "recall read-only")
        check(tools["forget"].annotations.destructiveHint is True, "forget destructive")
        check(tools["remember"].annotations.destructiveHint is False, "remember only adds")
        first = await carol.ok("remember", {"text": "prefers the Berlin warehouse"})
        await carol.ok("remember", {"text": "prefers metric units"})
        fact_id = first["fact"]["fact_id"]
        recalled = await carol.ok("recall", {})
        texts = [fact["text"] for fact in recalled["facts"]]
        check(texts == ["prefers the Berlin warehouse", "prefers metric units"], f"{texts}")
        msg = await carol.error("remember", {"text": "x", "user_id": "dave"})
        check("does not accept" in msg, f"fact smuggle: {msg}")
        check((await carol.ok("forget", {"fact_id": fact_id}))["forgotten"] is True, "forget")
        check(len((await carol.ok("recall", {}))["facts"]) == 1, "one fact left")
        msg = await carol.error("recall", {"limit": 1000})
        check("`limit`" in msg, f"recall limit: {msg}")
    async with Server(binary, store, app, "dave", namespace="facts", tools="facts") as dave:
        check((await dave.ok("recall", {}))["facts"] == [], "dave has no facts")


async def memory_tool_scenario(binary, store, app):
    """`--tools memory`: one tool, Claude's memory tool commands, files kept in the store."""
    async with Server(binary, store, app, "erin", namespace="files", tools="memory") as erin:
        tools = {tool.name: tool for tool in (await erin.session.list_tools()).tools}
        check(set(tools) == {"memory"}, f"memory tool names: {sorted(tools)}")
        schema = tools["memory"].inputSchema
        check(schema["properties"]["command"]["enum"] == MEMORY_COMMANDS, f"commands: {schema}")
        check(schema.get("required") == ["command"], "command is required")
        check(tools["memory"].annotations.destructiveHint is True, "memory is destructive")

        def call(command, **params):
            return dict(params, command=command)

        empty = await erin.text("memory", call("view", path="/memories"))
        check(empty == "Here're the files and directories up to 2 levels deep in /memories, "
                       "excluding hidden items:\n4K\t/memories", f"empty view: {empty!r}")
        made = await erin.text("memory", call("create", path="/memories/notes/prefs.md",
                                              file_text="Prefers tea.\n"))
        check(made == "File created successfully at: /memories/notes/prefs.md", made)
        msg = await erin.error("memory", call("create", path="/memories/notes/prefs.md",
                                              file_text="again"))
        check(msg == "File /memories/notes/prefs.md already exists", msg)
        edited = await erin.text("memory", call("str_replace", path="/memories/notes/prefs.md",
                                                old_str="tea", new_str="green tea"))
        check(edited.endswith("     1\tPrefers green tea.\n     2\t"), f"snippet: {edited!r}")
        await erin.text("memory", call("insert", path="/memories/notes/prefs.md",
                                       insert_line=0, insert_text="# Preferences"))
        shown = await erin.text("memory", call("view", path="/memories/notes/prefs.md",
                                               view_range=[1, 2]))
        check(shown == "Here's the content of /memories/notes/prefs.md with line numbers:\n"
                       "     1\t# Preferences\n     2\tPrefers green tea.", f"{shown!r}")
        listing = await erin.text("memory", call("view", path="/memories"))
        check("4K\t/memories/notes/\n33B\t/memories/notes/prefs.md" in listing, listing)
        moved = await erin.text("memory", call("rename", old_path="/memories/notes",
                                               new_path="/memories/archive"))
        check(moved == "Successfully renamed /memories/notes to /memories/archive", moved)
        msg = await erin.error("memory", call("view", path="/memories/notes"))
        check(msg == "The path /memories/notes does not exist. Please provide a valid path.", msg)
        msg = await erin.error("memory", call("view", path="/etc/passwd"))
        check(msg == "Path must start with /memories, got: /etc/passwd", msg)
        msg = await erin.error("memory", call("delete", path="/memories/archive",
                                              user_id="mallory"))
        check("`user_id`" in msg, f"smuggled parameter: {msg}")
        try:
            await erin.session.call_tool("memory_save", {"key": "k", "content": "v"})
        except McpError as err:
            check("unknown tool" in str(err), f"unknown tool error: {err}")
        else:
            raise AssertionError("a key tool was served by --tools memory")

    # The files are records of the bound scope: the key tools on the same namespace see them.
    async with Server(binary, store, app, "erin", namespace="files") as keys:
        got = await keys.ok("memory_get", {"key": "archive/prefs.md"})
        check(got["memory"]["content"] == "# Preferences\nPrefers green tea.\n", f"{got}")
    async with Server(binary, store, app, "frank", namespace="files", tools="memory") as frank:
        msg = await frank.error("memory", {"command": "view", "path": "/memories/archive"})
        check("does not exist" in msg, f"another user sees erin's files: {msg}")
        msg = await frank.error("memory", {"command": "delete", "path": "/memories"})
        check(msg == "Cannot delete the /memories directory itself", msg)
    async with Server(binary, store, app, "erin", namespace="files", tools="memory") as erin:
        gone = await erin.text("memory", {"command": "delete", "path": "/memories/archive"})
        check(gone == "Successfully deleted /memories/archive", gone)


async def main():
    binary, store, app = sys.argv[1:4]
    await key_tools_scenario(binary, store, app)
    await search_options_scenario(binary, store, app)
    await fact_tools_scenario(binary, store, app)
    await memory_tool_scenario(binary, store, app)
    print("mcp end-to-end scenario passed")


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(main(), timeout=240))
