"""Differential test of agent-memory's memory tool against the Anthropic SDK's reference.

Run by crates/agent-memory/tests/memory_tool_reference.rs as

    python memory_tool_reference.py SEED SEQUENCES

with this process's stdin and stdout connected to the Rust test, which runs
`agent_memory::memory_tool::run` on a real store. For each of SEQUENCES random command
sequences (sequence N is generated from the seed and N alone, so one sequence can be replayed),
every command goes to `BetaLocalFilesystemMemoryTool` (on a fresh temporary directory) and to
ours, and this script compares the two result texts, then (after every command but `view`)
every file's content. It writes
requests to stdout as JSON lines and reads one JSON reply line per request:

    {"op": "begin", "sequence": N}   -> {}                  a fresh, empty scope for sequence N
    {"op": "run", "input": {...}}    -> {"ok": bool, "text": str, "kind": str}
    {"op": "dump"}                   -> {"files": {key: content}}
    {"op": "done", ...counts}        (no reply)

Only the differences documented in the memory tool's docs (D1, D2, D3: see
`crates/agent-memory/src/memory_tool/docs.md`) are tolerated, each where it applies and
nowhere else; the counts of each are reported. Any other difference ends the run with exit
status 1 and a report naming the seed, the sequence and the commands so far.
"""

import errno
import json
import os
import random
import shutil
import sys
import tempfile

from anthropic.lib.tools import ToolError
from anthropic.tools import BetaLocalFilesystemMemoryTool

LISTING = "Here're the files and directories up to 2 levels deep in "
DIRECTORY_SIZE = "4K"  # what ours shows for every directory (D1)

NAMES = ["a", "b", "notes", "x.md", "y.txt", "z", ".hidden", "é", "résumé.md", "日記", "a b"]
WORDS = ["alpha", "beta", "gamma", "dup", "dup", "", "  indented", "tab\there", "é中", "x.md",
         "end\r", "- item", "a", "/memories"]


class Mismatch(Exception):
    pass


def ask(request):
    sys.stdout.write(json.dumps(request) + "\n")
    sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
        raise Mismatch("the Rust side closed the pipe")
    return json.loads(line)


# D3: the reference's operating-system failures ours reports as tool errors, each with the
# text ours gives instead: a file where a directory must be, a directory moved into itself;
# or, when the path concerned names nothing (the reference made its parent directory before
# failing), the command's usual "does not exist".
D3_CASES = {
    errno.ENOTDIR: "is a file, not a directory.",
    errno.EINVAL: "a directory cannot move into itself.",
}


def missing_text(command):
    """What ours says when the command's path names nothing."""
    if command["command"] == "rename":
        return f"The path {command['old_path']} does not exist"
    if command["command"] == "delete":
        return f"The path {command['path']} does not exist"
    return f"The path {command['path']} does not exist. Please provide a valid path."


def run_reference(tool, command):
    """("ok", text), ("error", text) for a ToolError, ("exception", err) for anything else."""
    try:
        return "ok", tool.call(command)
    except ToolError as err:
        return "error", err.content if isinstance(err.content, str) else str(err)
    except Exception as err:  # pylint: disable=broad-except
        return "exception", err


def files_of(root):
    """Every file below `root`: its path relative to it (with /), to its text."""
    files = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            with open(full, "rb") as f:
                files[rel] = f.read().decode("utf-8")
    return files


def prune_empty_directories(root):
    """D2: ours has no empty directories, so the reference's are removed after each command."""
    pruned = 0
    for dirpath, _dirs, _names in sorted(os.walk(root, topdown=False), key=lambda w: -len(w[0])):
        if dirpath != root and not os.listdir(dirpath):
            os.rmdir(dirpath)
            pruned += 1
    return pruned


def directories_of(root):
    dirs = []
    for dirpath, _dirs, _names in os.walk(root):
        if dirpath != root:
            dirs.append(os.path.relpath(dirpath, root).replace(os.sep, "/"))
    return dirs


def normalize_listing(text):
    """D1: the reference shows the file system's size of each directory, ours 4K; returns the
    text with the reference's directory sizes replaced by ours, and how many differed."""
    if not text.startswith(LISTING):
        return text, 0
    lines = text.split("\n")
    changed = 0
    for i in range(1, len(lines)):
        size, sep, path = lines[i].partition("\t")
        if sep and (i == 1 or path.endswith("/")) and size != DIRECTORY_SIZE:
            lines[i] = DIRECTORY_SIZE + "\t" + path
            changed += 1
    return "\n".join(lines), changed


class Generator:
    """Random commands, biased toward the paths that exist so that edits meet files."""

    def __init__(self, rng, root):
        self.rng = rng
        self.root = root

    def text(self):
        r = self.rng
        if r.random() < 0.1:
            return ""
        lines = [r.choice(WORDS) for _ in range(r.randint(1, 6))]
        text = "\n".join(lines)
        if r.random() < 0.5:
            text += "\n"
        if r.random() < 0.1:
            text = text.replace("\n", "\r\n")
        return text

    def existing(self):
        files = list(files_of(self.root))
        dirs = directories_of(self.root)
        return files, dirs

    def spelled(self, rel):
        """`rel` (a path below /memories, or "" for the root) in one of its spellings."""
        r = self.rng
        path = "/memories" + ("/" + rel if rel else "")
        roll = r.random()
        if roll < 0.05:
            path += "/"
        elif roll < 0.08 and rel:
            path = "/memories//" + rel
        elif roll < 0.11 and rel:
            path = "/memories/./" + rel
        elif roll < 0.14:
            path = "/memories/" + r.choice(NAMES) + "/../" + rel
        elif roll < 0.16:
            path = "/memories/../memories/" + rel
        return path

    def path(self, files_first=0.4):
        """A path: an existing file with probability `files_first`, else an existing
        directory, the root, a new path, or one outside /memories."""
        r = self.rng
        files, dirs = self.existing()
        roll = r.random()
        if roll < files_first and files:
            return self.spelled(r.choice(files))
        roll = r.random()
        if roll < 0.05:
            return r.choice(["/memories/../x", "/memories/../../etc", "/etc/passwd",
                             "memories/x", "/tmp/memories/x", "/memories/a/../../x"])
        if roll < 0.35 and dirs:
            return self.spelled(r.choice(dirs))
        if roll < 0.42:
            return self.spelled("")
        depth = r.randint(1, 3)
        base = r.choice(dirs) + "/" if dirs and r.random() < 0.4 else ""
        return self.spelled(base + "/".join(r.choice(NAMES) for _ in range(depth)))

    def content_of(self, path):
        rel = path[len("/memories"):].strip("/")
        full = os.path.join(self.root, rel)
        try:
            with open(full, "rb") as f:
                return f.read().decode("utf-8")
        except OSError:
            return None

    def command(self):
        r = self.rng
        kind = r.choices(["view", "create", "str_replace", "insert", "delete", "rename"],
                         weights=[25, 20, 15, 15, 10, 15])[0]
        if kind == "view":
            command = {"command": "view", "path": self.path(0.5)}
            content = self.content_of(command["path"]) or ""
            n = len(content.split("\n"))
            roll = r.random()
            if roll < 0.3:
                command["view_range"] = [r.randint(-2, n + 2), r.randint(-3, n + 2)]
            elif roll < 0.35:
                command["view_range"] = r.choice([[1], [], [1, 2, 3], [2, -1], None])
            return command
        if kind == "create":
            return {"command": "create", "path": self.path(), "file_text": self.text()}
        if kind == "str_replace":
            path = self.path(0.85)
            content = self.content_of(path)
            roll = r.random()
            if content and roll < 0.7:
                start = r.randrange(len(content))
                old = content[start:start + r.randint(1, 12)]
            elif roll < 0.8:
                old = r.choice(WORDS)
            elif roll < 0.9:
                old = ""
            else:
                old = "not in any file"
            return {"command": "str_replace", "path": path, "old_str": old,
                    "new_str": self.text() if r.random() < 0.5 else r.choice(WORDS)}
        if kind == "insert":
            path = self.path(0.85)
            content = self.content_of(path) or ""
            n = len(content.split("\n"))
            line = r.randint(0, n) if r.random() < 0.8 else r.choice([-1, n, n + 1, 10**6])
            return {"command": "insert", "path": path, "insert_line": line,
                    "insert_text": self.text()}
        if kind == "delete":
            return {"command": "delete", "path": self.path(0.5)}
        old = self.path(0.6)
        if r.random() < 0.1:
            new = old.rstrip("/") + "/" + r.choice(NAMES)  # into itself, or below a file
        else:
            new = self.path()
        return {"command": "rename", "old_path": old, "new_path": new}


def run_sequence(seed, index, counts):
    rng = random.Random(f"{seed}-{index}")
    base = tempfile.mkdtemp(prefix="memory-tool-reference-")
    try:
        tool = BetaLocalFilesystemMemoryTool(base_path=base)
        root = os.path.join(base, "memories")
        generator = Generator(rng, root)
        ask({"op": "begin", "sequence": index})
        history = []
        for step in range(rng.randint(5, 30)):
            # Most sequences start by making a few files.
            command = generator.command() if step >= 3 or rng.random() < 0.3 else {
                "command": "create", "path": generator.path(0.0), "file_text": generator.text()}
            history.append(command)
            where = lambda: (f"seed {seed}, sequence {index}, command {len(history)}:\n"
                             + "\n".join(json.dumps(c, ensure_ascii=False) for c in history))
            outcome, expected = run_reference(tool, command)
            counts["D2"] += 1 if prune_empty_directories(root) else 0
            ours = ask({"op": "run", "input": command})
            counts["commands"] += 1
            tally = counts["by_command"].setdefault(command["command"], {"ok": 0, "error": 0})
            tally["ok" if ours["ok"] else "error"] += 1
            if outcome == "exception":
                ours_instead = D3_CASES.get(getattr(expected, "errno", None))
                if ours_instead is None or ours["ok"] or not (
                        ours["text"].endswith(ours_instead)
                        or ours["text"] == missing_text(command)):
                    raise Mismatch(f"the reference failed with {expected!r}; ours "
                                   f"{'succeeded' if ours['ok'] else 'failed'} with "
                                   f"{ours['text']!r}\n{where()}")
                counts["D3"] += 1
            else:
                if ours["ok"] != (outcome == "ok"):
                    raise Mismatch(f"the reference {outcome}: {expected!r}\nours "
                                   f"{'ok' if ours['ok'] else 'error'}: {ours['text']!r}\n"
                                   f"{where()}")
                if outcome == "ok":
                    expected, normalized = normalize_listing(expected)
                    counts["D1"] += 1 if normalized else 0
                if ours["text"] != expected:
                    raise Mismatch(f"texts differ ({outcome})\nreference: {expected!r}\n"
                                   f"ours:      {ours['text']!r}\n{where()}")
            if command["command"] == "view":
                continue  # a view changes nothing on either side
            reference_files = files_of(root)
            our_files = ask({"op": "dump"})["files"]
            if our_files != reference_files:
                raise Mismatch(f"files differ\nreference: {reference_files!r}\n"
                               f"ours:      {our_files!r}\n{where()}")
        counts["sequences"] += 1
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main():
    seed, sequences = sys.argv[1], int(sys.argv[2])
    only = os.environ.get("AGENT_MEMORY_DIFF_ONLY")
    counts = {"sequences": 0, "commands": 0, "D1": 0, "D2": 0, "D3": 0, "by_command": {}}
    indices = [int(only)] if only else range(sequences)
    try:
        for index in indices:
            run_sequence(seed, index, counts)
    except Mismatch as err:
        print(f"memory tool differs from the reference: {err}", file=sys.stderr)
        print(f"replay: AGENT_MEMORY_DIFF_SEED={seed} AGENT_MEMORY_DIFF_ONLY=<sequence>",
              file=sys.stderr)
        sys.exit(1)
    ask_done = dict(counts, op="done")
    sys.stdout.write(json.dumps(ask_done) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
