"""The `code_execution` toolset: run a Python snippet in the task's sandbox."""

from __future__ import annotations

import secrets
import shlex
import time

from hermes_runner.config import CodeExecutionConfig
from hermes_runner.errors import ToolError
from hermes_runner.tools.base import ToolContext, ToolResult, number_arg, params, text_arg, tool
from hermes_runner.util.text import clip

MAX_FILE_KB = 100 * 1024  # ulimit -f: no stderr/result file may fill the disk

# Runs the snippet as __main__ and writes repr() of a final expression to argv[2];
# tracebacks leave out this driver's own frames.
DRIVER = """\
import ast, sys, traceback
path, result_path = sys.argv[1], sys.argv[2]
source = open(path, encoding="utf-8").read()
sys.argv = [path]
sys.path.insert(0, ".")
g = {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__}
try:
    tree = ast.parse(source, path)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, path, "exec"), g)
    if last is not None:
        value = eval(compile(last, path, "eval"), g)
        if value is not None:
            with open(result_path, "w", encoding="utf-8") as fp:
                fp.write(repr(value))
except SystemExit:
    raise
except BaseException as exc:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)
    sys.exit(1)
"""


@tool(
    "code_execution",
    "execute_code",
    "Run a Python script in the task's environment (same files as the terminal) and return its "
    "stdout, stderr, exit code and the repr of a final expression, like a notebook cell. "
    "Use it for calculations, data processing and quick experiments. Nothing persists between "
    "calls except files.",
    params(
        "code",
        code={"type": "string", "description": "Python source to run."},
        timeout={
            "type": "integer",
            "minimum": 1,
            "description": "Seconds before the script is killed (default 60).",
        },
    ),
)
async def execute_code(ctx: ToolContext, args: dict) -> ToolResult:
    cfg: CodeExecutionConfig = ctx.services.get("code_execution") or CodeExecutionConfig()
    code = text_arg(args, "code")
    timeout = number_arg("timeout", args.get("timeout") or cfg.timeout_s)
    timeout = max(1.0, min(timeout, cfg.max_timeout_s))
    d = f".hermes_exec_{secrets.token_hex(4)}"
    q = shlex.quote
    await ctx.sandbox.write_file(f"{d}/driver.py", DRIVER.encode())
    await ctx.sandbox.write_file(f"{d}/snippet.py", code.encode())
    command = (
        f"ulimit -f {MAX_FILE_KB} 2>/dev/null; {q(cfg.python)} -u {d}/driver.py {d}/snippet.py {d}/result 2> {d}/stderr"
    )
    started = time.monotonic()
    try:
        res = await ctx.sandbox.run(command, timeout)
        elapsed = time.monotonic() - started
        stderr = await _read(ctx, f"{d}/stderr")
        result = await _read(ctx, f"{d}/result")
    finally:
        await ctx.sandbox.run(f"rm -rf -- {q(d)}", 30)
    payload = {
        "stdout": res.output,
        "stderr": clip(stderr.replace(f"{d}/snippet.py", "<code>"), cfg.max_stderr_chars),
        "result": clip(result, cfg.max_result_chars) if result else None,
        "exit_code": res.exit_code,
        "duration_s": round(elapsed, 3),
    }
    if res.timed_out:
        payload["error"] = f"timed out after {timeout:g}s and was killed"
    return ToolResult.of(payload, ok=not res.timed_out)


async def _read(ctx: ToolContext, path: str) -> str:
    try:
        return (await ctx.sandbox.read_file(path)).decode(errors="replace")
    except ToolError:
        return ""
