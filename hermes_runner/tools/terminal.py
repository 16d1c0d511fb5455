"""The `terminal` toolset: run a shell command in the task's sandbox."""

from __future__ import annotations

from hermes_runner.errors import ToolError
from hermes_runner.tools.base import ToolContext, ToolResult, number_arg, params, text_arg, tool

TERMINAL_PARAMS = params(
    "command",
    command={"type": "string", "description": "The shell command to run."},
    timeout={
        "type": "integer",
        "minimum": 1,
        "description": "Seconds before the command is killed (default 180). Returns as soon as it exits.",
    },
    workdir={"type": "string", "description": "Directory to run in (default: the task's working directory)."},
)


@tool(
    "terminal",
    "terminal",
    "Run a shell command in the task's isolated environment and return its combined "
    "stdout/stderr and exit code. Long output is truncated in the middle. Use it to "
    "inspect files, run programs, install packages and test code.",
    TERMINAL_PARAMS,
)
async def terminal(ctx: ToolContext, args: dict) -> ToolResult:
    command = text_arg(args, "command")
    timeout = number_arg("timeout", args.get("timeout", ctx.command_timeout_s))
    timeout = max(1.0, min(timeout, ctx.command_timeout_s * 4))
    workdir = args.get("workdir")
    if workdir is not None and not isinstance(workdir, str):
        raise ToolError("'workdir' must be a string")
    res = await ctx.sandbox.run(command, timeout, workdir or None)
    error = f"command timed out after {timeout:g}s and was killed" if res.timed_out else None
    # A non-zero exit code is an answer, not a tool failure: the model sees it and adapts.
    return ToolResult.of({"output": res.output, "exit_code": res.exit_code, "error": error}, ok=not res.timed_out)
