"""execute_code runs Python in the task's real sandbox."""

from __future__ import annotations

import pytest

from tests.helpers.run import base_overrides, compose_cfg
from tests.helpers.tool_harness import call, run_tools


@pytest.fixture
def cfg(server, tmp_path):
    return compose_cfg(base_overrides(server, tmp_path) + ["run_name=t", "dataset_file=x.jsonl"])


def test_stdout_stderr_result_and_files(cfg):
    code = (
        "import sys, pathlib\n"
        "print('out line')\n"
        "print('warn line', file=sys.stderr)\n"
        "pathlib.Path('data.txt').write_text('made by code')\n"
        "x = 6\n"
        "x * 7\n"
    )

    async def body(ctx):
        run, ok = await call(ctx, "execute_code", code=code)
        read, _ = await call(ctx, "read_file", path="data.txt")
        ls, _ = await call(ctx, "terminal", command="ls -a")
        return run, ok, read, ls

    run, ok, read, ls = run_tools(cfg, ["code_execution", "file", "terminal"], body)
    assert ok
    assert run["stdout"] == "out line\n" and run["stderr"] == "warn line\n"
    assert run["result"] == "42" and run["exit_code"] == 0
    assert read["content"] == "1|made by code"  # same sandbox as the file tools
    assert ".hermes_exec" not in ls["output"]  # the runner's scratch files are gone


def test_exception_traceback_shows_the_code_only(cfg):
    async def body(ctx):
        return await call(ctx, "execute_code", code="def f():\n    return 1 / 0\nprint('before')\nf()\n")

    run, ok = run_tools(cfg, ["code_execution"], body)
    assert ok and run["exit_code"] == 1 and run["stdout"] == "before\n" and run["result"] is None
    err = run["stderr"]
    assert err.startswith("Traceback") and "ZeroDivisionError: division by zero" in err
    assert 'File "<code>", line 2, in f' in err and "return 1 / 0" in err
    assert "driver.py" not in err and "exec(compile" not in err


def test_syntax_error_and_exit_code(cfg):
    async def body(ctx):
        bad, _ = await call(ctx, "execute_code", code="print('x'\n")
        code, _ = await call(ctx, "execute_code", code="import sys\nprint('bye')\nsys.exit(3)\n")
        return bad, code

    bad, code = run_tools(cfg, ["code_execution"], body)
    assert bad["exit_code"] == 1 and "SyntaxError" in bad["stderr"]
    assert code["exit_code"] == 3 and code["stdout"] == "bye\n"


def test_timeout_kills_the_script(cfg):
    async def body(ctx):
        return await call(
            ctx, "execute_code", code="import time\nprint('started', flush=True)\ntime.sleep(30)\n", timeout=1
        )

    run, ok = run_tools(cfg, ["code_execution"], body)
    assert not ok and run["error"] == "timed out after 1s and was killed"
    assert run["exit_code"] == 124 and run["stdout"] == "started\n" and run["duration_s"] < 10


def test_bad_arguments(cfg):
    async def body(ctx):
        return await call(ctx, "execute_code", code="  "), await call(ctx, "execute_code", code="1", timeout="soon")

    (empty, ok1), (bad_timeout, ok2) = run_tools(cfg, ["code_execution"], body)
    assert not ok1 and empty["error"] == "'code' must be a non-empty string"
    assert not ok2 and "'timeout' must be a number" in bad_timeout["error"]
