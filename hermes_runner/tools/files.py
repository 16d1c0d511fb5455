"""The `file` toolset: read, write, patch and search files in the task's sandbox."""

from __future__ import annotations

import difflib
import re
import shlex

from hermes_runner.errors import ToolError
from hermes_runner.tools.base import ToolContext, ToolResult, number_arg, params, tool

MAX_READ_LIMIT = 2000


def _str_arg(args: dict, name: str, required: bool = True, default: str | None = None) -> str | None:
    value = args.get(name, default)
    if value is None:
        if required:
            raise ToolError(f"missing required argument '{name}'")
        return None
    if not isinstance(value, str):
        raise ToolError(f"'{name}' must be a string")
    return value


def _int_arg(args: dict, name: str, default: int, lo: int, hi: int | None = None) -> int:
    value = number_arg(name, args.get(name, default), int)
    if value < lo or (hi is not None and value > hi):
        raise ToolError(f"'{name}' must be between {lo} and {hi}" if hi else f"'{name}' must be >= {lo}")
    return value


async def _read_text(ctx: ToolContext, path: str) -> str:
    data = await ctx.sandbox.read_file(path)
    if b"\0" in data[:8192]:
        raise ToolError(f"{path} looks like a binary file")
    return data.decode(errors="replace")


@tool(
    "file",
    "read_file",
    "Read a text file with line numbers (LINE|CONTENT). Use offset/limit to page through long files.",
    params(
        "path",
        path={"type": "string", "description": "File path (relative to the working directory or absolute)."},
        offset={"type": "integer", "minimum": 1, "description": "First line to read, 1-based (default 1)."},
        limit={
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_READ_LIMIT,
            "description": "Lines to read (default 500).",
        },
    ),
)
async def read_file(ctx: ToolContext, args: dict) -> ToolResult:
    path = _str_arg(args, "path")
    offset = _int_arg(args, "offset", 1, 1)
    limit = _int_arg(args, "limit", 500, 1, MAX_READ_LIMIT)
    lines = (await _read_text(ctx, path)).splitlines()
    chunk = lines[offset - 1 : offset - 1 + limit]
    body = "\n".join(f"{n}|{line}" for n, line in enumerate(chunk, start=offset))
    more = offset - 1 + len(chunk) < len(lines)
    return ToolResult.of({"content": body, "total_lines": len(lines), "truncated": more})


@tool(
    "file",
    "write_file",
    "Write a file, replacing its content; parent directories are created.",
    params(
        "path",
        "content",
        path={"type": "string", "description": "File path."},
        content={"type": "string", "description": "The complete new content."},
    ),
)
async def write_file(ctx: ToolContext, args: dict) -> ToolResult:
    path = _str_arg(args, "path")
    content = _str_arg(args, "content")
    data = content.encode()
    await ctx.sandbox.write_file(path, data)
    return ToolResult.of({"path": path, "bytes_written": len(data)})


def _diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"))


def _find_block(text: str, block: str) -> tuple[int, int] | None:
    """Locate `block` in `text`: exactly, else line by line ignoring surrounding whitespace."""
    pos = text.find(block)
    if pos >= 0:
        return pos, pos + len(block)
    want = [line.strip() for line in block.strip("\n").splitlines()]
    if not want:
        return None
    lines = text.splitlines(True)
    for i in range(len(lines) - len(want) + 1):
        if all(lines[i + j].strip() == want[j] for j in range(len(want))):
            start = sum(len(x) for x in lines[:i])
            end = start + sum(len(x) for x in lines[i : i + len(want)])
            return start, end
    return None


async def _replace(ctx: ToolContext, args: dict) -> ToolResult:
    path = _str_arg(args, "path")
    old = _str_arg(args, "old_string")
    new = _str_arg(args, "new_string")
    if not old:
        raise ToolError("'old_string' must not be empty")
    text = await _read_text(ctx, path)
    if args.get("replace_all"):
        if old not in text:
            raise ToolError(f"old_string not found in {path}")
        after = text.replace(old, new)
    else:
        count = text.count(old)
        if count > 1:
            raise ToolError(f"old_string occurs {count} times in {path}; add context or set replace_all")
        span = _find_block(text, old)
        if span is None:
            raise ToolError(f"old_string not found in {path}")
        if count == 0 and not new.endswith("\n") and text[span[1] - 1 : span[1]] == "\n":
            new += "\n"  # the whitespace-insensitive match covered whole lines
        after = text[: span[0]] + new + text[span[1] :]
    await ctx.sandbox.write_file(path, after.encode())
    return ToolResult.of({"success": True, "diff": _diff(path, text, after)})


def parse_v4a(patch: str) -> list[dict]:
    """Parse a V4A patch (*** Begin Patch / *** Update|Add|Delete File: / *** End Patch)."""
    lines = patch.strip("\n").splitlines()
    if not lines or lines[0].strip() != "*** Begin Patch":
        raise ToolError("patch must start with '*** Begin Patch'")
    ops: list[dict] = []
    cur: dict | None = None
    for raw in lines[1:]:
        line = raw.rstrip("\r")
        head = re.match(r"\*\*\* (Update|Add|Delete) File: (.+)$", line.strip())
        if line.strip() == "*** End Patch":
            cur = None
            break
        if head:
            cur = {"op": head.group(1).lower(), "path": head.group(2).strip(), "hunks": [], "lines": [], "move": None}
            ops.append(cur)
            continue
        if cur is None:
            if line.strip():
                raise ToolError(f"unexpected line outside a file section: {line!r}")
            continue
        if line.startswith("*** Move to: "):
            cur["move"] = line[len("*** Move to: ") :].strip()
        elif cur["op"] == "add":
            if not line.startswith("+"):
                raise ToolError(f"lines of an added file must start with '+': {line!r}")
            cur["lines"].append(line[1:])
        elif cur["op"] == "update":
            if line.startswith("@@"):
                cur["hunks"].append([])
                continue
            if not cur["hunks"]:
                cur["hunks"].append([])
            if line == "*** End of File":
                continue
            tag, body = (line[0], line[1:]) if line and line[0] in " +-" else (" ", line)
            cur["hunks"][-1].append((tag, body))
    if not ops:
        raise ToolError("patch contains no file operations")
    return ops


async def _delete(ctx: ToolContext, path: str) -> None:
    """Delete one file in the sandbox; a file that is missing or cannot be removed is an error."""
    q = shlex.quote(path)
    res = await ctx.sandbox.run(
        f"[ -d {q} ] && [ ! -L {q} ] && {{ echo 'is a directory' >&2; exit 1; }}; rm -- {q}", 30
    )
    if res.exit_code != 0 or res.timed_out:
        reason = res.output.strip().rsplit(": ", 1)[-1] or f"exit code {res.exit_code}"
        raise ToolError(f"cannot delete {path}: {reason}")


async def _apply_v4a(ctx: ToolContext, args: dict) -> ToolResult:
    ops = parse_v4a(_str_arg(args, "patch"))
    diffs: list[str] = []
    for op in ops:
        path = op["path"]
        if op["op"] == "add":
            after = "\n".join(op["lines"]) + "\n"
            await ctx.sandbox.write_file(path, after.encode())
            diffs.append(_diff(path, "", after))
        elif op["op"] == "delete":
            await _delete(ctx, path)
            diffs.append(f"deleted {path}\n")
        else:
            before = text = await _read_text(ctx, path)
            for hunk in op["hunks"]:
                old = "".join(b + "\n" for t, b in hunk if t in " -")
                new = "".join(b + "\n" for t, b in hunk if t in " +")
                if not old:
                    text = text + ("" if text.endswith("\n") or not text else "\n") + new
                    continue
                span = _find_block(text, old)
                if span is None:
                    raise ToolError(f"hunk does not match {path}:\n{old}")
                text = text[: span[0]] + new + text[span[1] :]
            target = op["move"] or path
            await ctx.sandbox.write_file(target, text.encode())
            if op["move"] and op["move"] != path:
                await _delete(ctx, path)
            diffs.append(_diff(target, before, text))
    return ToolResult.of({"success": True, "diff": "".join(diffs)})


@tool(
    "file",
    "patch",
    "Edit files. mode='replace' swaps old_string for new_string in one file (unique match "
    "unless replace_all). mode='patch' applies a V4A multi-file patch "
    "('*** Begin Patch' ... '*** Update File: path' / '*** Add File: path' / "
    "'*** Delete File: path', hunks after '@@' with ' ', '-', '+' lines ... '*** End Patch').",
    params(
        "mode",
        mode={"type": "string", "enum": ["replace", "patch"], "description": "Edit mode (default replace)."},
        path={"type": "string", "description": "File to edit (replace mode)."},
        old_string={"type": "string", "description": "Text to find (replace mode)."},
        new_string={"type": "string", "description": "Replacement text (replace mode)."},
        replace_all={"type": "boolean", "description": "Replace every occurrence (default false)."},
        patch={"type": "string", "description": "V4A patch text (patch mode)."},
    ),
)
async def patch(ctx: ToolContext, args: dict) -> ToolResult:
    mode = args.get("mode", "replace")
    if mode == "replace":
        return await _replace(ctx, args)
    if mode == "patch":
        return await _apply_v4a(ctx, args)
    raise ToolError(f"'mode' must be 'replace' or 'patch', not {mode!r}")


@tool(
    "file",
    "search_files",
    "Search file contents with a regular expression (target='content') or find files by "
    "name with a glob (target='files'). Prefer this to ls/find/grep in the terminal.",
    params(
        "pattern",
        pattern={"type": "string", "description": "Regex (content) or glob (files)."},
        target={
            "type": "string",
            "enum": ["content", "files"],
            "description": "What to search (default content).",
        },
        path={"type": "string", "description": "Directory to search (default '.')."},
        file_glob={"type": "string", "description": "Only search files whose name matches this glob."},
        limit={"type": "integer", "minimum": 1, "description": "Maximum results (default 50)."},
        offset={"type": "integer", "minimum": 0, "description": "Results to skip (default 0)."},
        output_mode={
            "type": "string",
            "enum": ["content", "files_only", "count"],
            "description": "Content search output: matching lines, file names, or counts per file.",
        },
        context={"type": "integer", "minimum": 0, "description": "Lines of context around matches (default 0)."},
    ),
)
async def search_files(ctx: ToolContext, args: dict) -> ToolResult:
    pattern = _str_arg(args, "pattern")
    target = _str_arg(args, "target", False, "content")
    path = _str_arg(args, "path", False, ".")
    glob = _str_arg(args, "file_glob", False, "*")
    limit = _int_arg(args, "limit", 50, 1, 1000)
    offset = _int_arg(args, "offset", 0, 0)
    mode = _str_arg(args, "output_mode", False, "content")
    context = _int_arg(args, "context", 0, 0, 20)
    q = shlex.quote
    find = f"find {q(path)} -type d -name .git -prune -o -type f"
    if target == "files":
        cmd = f"{find} -name {q(pattern)} -print 2>/dev/null | sort"
    elif target == "content":
        flag = {"content": "-nH" + (f" -C {context}" if context else ""), "files_only": "-l", "count": "-cH"}.get(mode)
        if flag is None:
            raise ToolError(f"'output_mode' must be content, files_only or count, not {mode!r}")
        cmd = f"{find} -name {q(glob)} -exec grep -E {flag} -e {q(pattern)} {{}} + 2>/dev/null"
        if mode == "count":
            cmd += " | grep -v ':0$'"
    else:
        raise ToolError(f"'target' must be 'content' or 'files', not {target!r}")
    res = await ctx.sandbox.run(cmd, ctx.command_timeout_s)
    if res.timed_out:
        raise ToolError("search timed out")
    results = [line for line in res.output.splitlines() if line]
    page = results[offset : offset + limit]
    return ToolResult.of({"matches": page, "total": len(results), "truncated": offset + limit < len(results)})
