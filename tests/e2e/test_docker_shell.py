"""The Docker sandbox's long-lived shell (exec_mode=shell) on a real engine: each call keeps its own
exit code, timeout, output cap and stdin; odd commands and a killed shell leave the sandbox usable.

The cases that do not depend on the shell also run with exec_mode=exec: both modes behave alike.
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import time

import pytest

from hermes_runner.config import DockerExecMode, DockerSandboxOptions, SandboxConfig
from hermes_runner.dataset import Prompt
from hermes_runner.errors import ToolError
from hermes_runner.sandbox.docker.backend import DockerBackend

from tests.helpers.machine import require
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.docker

BASE = "local/busybox:ci"
SERVER_RE = "while rea[d] -r op"  # matches the shell's own command line (and its forks), not a grep given it
KILL_SHELL = f"kill -9 $(ps -o pid,args | grep '{SERVER_RE}' | awk '{{print $1}}')"
BOTH = pytest.mark.parametrize("mode", list(DockerExecMode))


def outside(sb, command: str) -> bool:
    """Run `command` in the sandbox's container beside its shell (`docker exec`); whether it exited 0."""
    return subprocess.run(["docker", "exec", sb.id, "sh", "-c", command], capture_output=True).returncode == 0


def in_sandbox(tmp_path, body, mode=DockerExecMode.shell, **cfg):
    """Run `body(sandbox)` in one fresh container; return its result."""
    require("docker")

    async def go():
        opts = DockerSandboxOptions(pool_size=0, exec_mode=mode)
        backend = DockerBackend(SandboxConfig(backend="docker", image=BASE, docker=opts, **cfg), "sh", str(tmp_path))
        assert await backend.start({BASE}) == {}
        sb = await backend.create(Prompt(0, "k", "p"))
        try:
            return await body(sb)
        finally:
            await sb.close()
            await backend.shutdown()

    return asyncio.run(go())


@BOTH
def test_exit_codes_and_exact_output(tmp_path, mode):
    async def body(sb):
        cmds = ["echo hi", "printf 'no newline'", "exit 3", "echo err >&2; echo out", "kill -9 $$", "pwd; id -u"]
        return [await sb.run(c, 20) for c in cmds]

    hi, nonl, three, both, killed, where = in_sandbox(tmp_path, body, mode)
    assert (hi.exit_code, hi.output) == (0, "hi\n")
    assert (nonl.exit_code, nonl.output) == (0, "no newline")
    assert three.exit_code == 3 and three.output == ""
    assert both.output == "err\nout\n"
    assert killed.exit_code == 137
    assert where.output == "/workspace\n1000\n"  # the working dir and the non-root user of a per-call exec


def test_calls_go_through_one_shell(tmp_path):
    async def body(sb):
        return [int(r.output) for r in [await sb.run(f"ps -o args | grep -c '{SERVER_RE}'", 20) for _ in range(3)]]

    assert all(n >= 1 for n in in_sandbox(tmp_path, body))
    assert in_sandbox(tmp_path / "x", body, DockerExecMode.exec) == [0, 0, 0]


@BOTH
def test_timeout_leaves_the_sandbox_usable(tmp_path, mode):
    async def body(sb):
        t = time.monotonic()
        slow = await sb.run("echo begin; sleep 300 & sh -c 'sleep 301'; echo never", 1)
        took = time.monotonic() - t
        after = await sb.run("ps -o args | grep 'sleep 30' | grep -v grep; echo end", 20)
        again = await sb.run("exit 5", 20)
        return slow, took, after, again

    slow, took, after, again = in_sandbox(tmp_path, body, mode)
    assert slow.timed_out and slow.exit_code == 124 and slow.output == "begin\n"
    assert took < 10, took
    assert after.output == "end\n"  # the whole tree was killed
    assert again.exit_code == 5 and not again.timed_out


@BOTH
def test_output_is_clipped_per_call(tmp_path, mode):
    async def body(sb):
        return await sb.run("yes 0123456789 | head -c 200000; echo; echo tail-end", 30), await sb.run("echo ok", 20)

    big, ok = in_sandbox(tmp_path, body, mode, max_output_chars=1000)
    assert big.exit_code == 0 and "bytes truncated" in big.output and big.output.endswith("tail-end\n")
    assert len(big.output) < 1200
    assert ok.output == "ok\n"


@BOTH
def test_stdin_closed_stdout_and_marker_like_output(tmp_path, mode):
    fake = secrets.token_hex(16)

    async def body(sb):
        stdin = await sb.run('cat; read x; echo "[$x]"', 20)  # stdin is empty, never the shell's own
        closed = await sb.run("exec >&- 2>&-; sleep 0.2; exit 4", 20)
        marker = await sb.run(f"printf 'S{fake}\\nE{fake} 0\\n'; exit 6", 20)
        after = await sb.run("echo fine", 20)
        return stdin, closed, marker, after

    stdin, closed, marker, after = in_sandbox(tmp_path, body, mode)
    assert (stdin.exit_code, stdin.output) == (0, "[]\n")
    assert (closed.exit_code, closed.output) == (4, "")
    assert (marker.exit_code, marker.output) == (6, f"S{fake}\nE{fake} 0\n")
    assert after.output == "fine\n"


def test_background_output_never_reaches_a_later_call(tmp_path):
    async def body(sb):
        # The background job writes once told to (/tmp/go), after the call returned: a call that waited for it
        # would time out, whatever the machine's speed.
        bg = "(while [ ! -e /tmp/go ]; do sleep 0.05; done; echo late; echo late >&2; touch /tmp/gone) & echo now"
        now = await sb.run(bg, 20)
        outside(sb, "touch /tmp/go")
        await asyncio.to_thread(wait_for, lambda: outside(sb, "test -e /tmp/gone"), 30, "the background output")
        nxt = await sb.run("echo next", 20)
        last = await sb.run("echo last", 20)
        return now, nxt, last

    now, nxt, last = in_sandbox(tmp_path, body)
    assert now.output == "now\n" and not now.timed_out
    assert nxt.output == "next\n" and last.output == "last\n"


def test_killed_shell_mid_run_then_the_next_call_works(tmp_path):
    async def body(sb):
        task = asyncio.create_task(sb.run("echo started; touch /tmp/started; sleep 20; echo never", 30))
        await asyncio.to_thread(wait_for, lambda: outside(sb, "test -e /tmp/started"), 30, "the command to start")
        subprocess.run(["docker", "exec", sb.id, "sh", "-c", KILL_SHELL], check=True)
        t = time.monotonic()
        died = await task
        took = time.monotonic() - t
        return died, took, await sb.run("echo again", 20), await sb.read_file("/etc/hostname")

    died, took, again, host = in_sandbox(tmp_path, body)
    assert died.output.startswith("started\n") and "shell ended during this command" in died.output
    assert died.exit_code != 0 and took < 10
    assert again.output == "again\n" and host.strip()


def test_files_and_odd_paths(tmp_path):
    async def body(sb):
        await sb.write_file("d/bin.dat", bytes(range(256)) * 40)
        data = await sb.read_file("d/bin.dat")
        await sb.run("mkdir -p '/tmp/a b '", 20)
        spaced = await sb.run("pwd", 20, workdir="/tmp/a b ")  # not a header-safe path: a per-call exec
        with pytest.raises(ToolError, match="workdir does not exist"):
            await sb.run("true", 5, workdir="/nope")
        with pytest.raises(ToolError, match="file not found"):
            await sb.read_file("missing.txt")
        with pytest.raises(ToolError, match="Read-only file system"):
            await sb.write_file("/etc/evil", b"x" * 100_000)  # the payload is drained: the shell stays in step
        return data, spaced, await sb.run("echo still", 20)

    data, spaced, still = in_sandbox(tmp_path, body)
    assert data == bytes(range(256)) * 40
    assert spaced.output == "/tmp/a b \n"
    assert still.output == "still\n"


def test_concurrent_calls_on_one_sandbox(tmp_path):
    async def body(sb):
        return await asyncio.gather(*(sb.run(f"sleep 0.5; echo {i}", 20) for i in range(4)))

    results = in_sandbox(tmp_path, body)
    assert [r.output for r in results] == [f"{i}\n" for i in range(4)]


@BOTH
def test_multi_line_heredoc_and_large_commands(tmp_path, mode):
    heredoc = "cat <<'X'\n  two  spaces\\n kept\t\nX\nx=1 \\\n  y=2; echo \"$x$y\""
    big = f"x='{'q' * 40_000}'; echo ${{#x}}"  # past the short-command path: its bytes go by `head`
    many = "\n".join(f"echo {i}" for i in range(300)) + "\n\n\n"

    async def body(sb):
        return [await sb.run(c, 30) for c in (heredoc, big, many, "echo done")]

    doc, large, lines, done = in_sandbox(tmp_path, body, mode)
    assert doc.output == "  two  spaces\\n kept\t\n12\n"
    assert large.output == "40000\n"
    assert lines.output == "".join(f"{i}\n" for i in range(300))
    assert done.output == "done\n"
