"""Escape attempts against both sandboxes, as a model's commands would make them (run as root in CI).

Local: bubblewrap + an unprivileged per-prompt uid + cgroups (docs/sandboxes.md). Docker: the
backend's defaults. The Docker half needs an engine and skips without one, unless
HERMES_REQUIRE_DOCKER=1 (as in tests/e2e/test_docker_sandbox.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hermes_runner.config import DockerSandboxOptions, SandboxConfig
from hermes_runner.dataset import Prompt
from hermes_runner.errors import ConfigError, ToolError
from hermes_runner.sandbox.base import SAFE_ENV_KEYS
from hermes_runner.sandbox.local.backend import MARKER, LocalBackend
from hermes_runner.tools.base import ToolContext
from hermes_runner.tools.catalog import all_tools

import tests.e2e.test_docker_sandbox as docker_tests
from tests.helpers.containers import two_prompts
from tests.helpers.run import ROOT, LiveRunner, base_overrides, read_jsonl, script, write_jsonl
from tests.helpers.wait import wait_for

BASE = docker_tests.BASE  # the test image
engine = docker_tests.engine  # the Docker engine fixture (skips, or fails under HERMES_REQUIRE_DOCKER=1)

AS_ROOT = os.geteuid() == 0
HAS_BWRAP = shutil.which("bwrap") is not None
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap not installed")
BIG = 200 * 1024  # over the 128 KiB a single argv string may hold
# what a sandboxed process may have in its environment (and so in /proc/self/environ)
ALLOWED_ENV = set(SAFE_ENV_KEYS) | {"HOME", "TMPDIR", "PWD", "SHLVL", "OLDPWD", "_", "HOSTNAME"}


def env_keys(text: str) -> set[str]:
    return {item.split("=", 1)[0] for item in text.replace("\0", "\n").splitlines() if "=" in item}


class Boxes:
    """A local backend with `n` prompt sandboxes, driven synchronously."""

    def __init__(self, root: Path, n: int = 1, run_name: str = "esc", **local):
        cfg = SandboxConfig()
        cfg.local.root = str(root)
        for k, v in local.items():
            setattr(cfg.local, k, v)
        self.loop = asyncio.new_event_loop()
        self.backend = LocalBackend(cfg, run_name)
        self.loop.run_until_complete(self.backend.start(set()))
        self.boxes = [self.loop.run_until_complete(self.backend.create(Prompt(i, f"k{i}", "p"))) for i in range(n)]
        self.ctxs = [ToolContext(b, command_timeout_s=20, max_output_chars=50_000) for b in self.boxes]

    def sh(self, command: str, i: int = 0, timeout: float = 20):
        return self.loop.run_until_complete(self.boxes[i].run(command, timeout))

    def tool(self, name: str, i: int = 0, **args) -> tuple[dict, bool]:  # noqa: D102
        try:
            res = self.loop.run_until_complete(all_tools()[name].run(self.ctxs[i], args))
        except ToolError as exc:
            return {"error": str(exc)}, False
        return json.loads(res.content), res.ok

    def close(self) -> None:
        if self.loop.is_closed():
            return
        for b in self.boxes:
            self.loop.run_until_complete(b.close())
        self.loop.run_until_complete(self.backend.shutdown())
        self.loop.close()


@pytest.fixture
def boxes(tmp_path):
    b = Boxes(tmp_path / "sbx", n=2)
    yield b
    b.close()


# -- local sandbox: privileges and mounts -----------------------------------------------------


@needs_bwrap
def test_local_commands_run_unprivileged_without_capabilities(boxes):
    res = boxes.sh("id -u; grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status; grep NoNewPrivs /proc/self/status")
    lines = res.output.split("\n")
    assert lines[0] != "0", res.output
    assert all(line.split()[1] == "0000000000000000" for line in lines[1:4]), res.output


@needs_bwrap
def test_local_remount_cannot_write_the_host(boxes, tmp_path):
    target = Path("/var/tmp") / f"hermes-escape-{os.getpid()}"
    attempts = [
        f"mount -o remount,bind,rw / && echo x > {target}",
        f"mount -o remount,bind,rw /usr && echo x > /usr/hermes-escape-{os.getpid()}",
        f"unshare -Urm sh -c 'mount -o remount,bind,rw /usr && echo x > /usr/hermes-escape-{os.getpid()}'",
        f"unshare -Urm sh -c 'umount -l /usr; mount -t tmpfs t /usr; echo x > /usr/e' && ls {target}",
        "touch /etc/hermes-escape /usr/hermes-escape /hermes-escape /opt/hermes-escape",
    ]
    for cmd in attempts:
        res = boxes.sh(cmd)
        assert res.exit_code != 0, (cmd, res.output)
    assert not target.exists() and not Path(f"/usr/hermes-escape-{os.getpid()}").exists()
    assert not Path("/etc/hermes-escape").exists() and not Path("/hermes-escape").exists()


@needs_bwrap
def test_local_docker_socket_run_root_and_homes_are_invisible(boxes):
    sock = Path("/var/run/docker.sock")
    res = boxes.sh(
        "for p in /var/run/docker.sock /run/docker.sock /run /var/run /var /root /home; do "
        "[ -e $p ] && echo VISIBLE $p; done; "
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('/var/run/docker.sock')\" "
        "2>&1 | tail -n 1"
    )
    assert "VISIBLE" not in res.output and "FileNotFoundError" in res.output, res.output
    out, ok = boxes.tool("read_file", path="/var/run/docker.sock")
    assert not ok and "not found" in out["error"]
    if sock.exists():  # the control: the socket is really there on this host
        assert sock.is_socket()


@pytest.fixture
def outside_tmp():
    """A sandbox root outside /tmp (the sandbox's /tmp is its own, which would hide a root there anyway)."""
    base = Path("/var/tmp" if AS_ROOT else Path.home() / ".cache") / f"hermes-escape-{os.getpid()}-{time.time_ns()}"
    yield base
    shutil.rmtree(base, ignore_errors=True)


@needs_bwrap
def test_local_sandbox_root_and_run_dirs_are_masked(outside_tmp):
    root = outside_tmp / "sbx"
    boxes = Boxes(root, n=2)
    a, b = boxes.boxes
    try:
        _check_masked(boxes, root, a)
    finally:
        boxes.close()


def _check_masked(boxes, root, a):
    (root / "other-run-1").mkdir()
    (root / "other-run-1" / "secret").write_text("other run")
    listing = boxes.sh(f"ls -a {root} {Path(a.cwd).parent.parent} {Path(a.cwd).parent} 2>/dev/null", i=1)
    assert "other-run-1" not in listing.output and Path(a.cwd).parent.name not in listing.output, listing.output
    assert "other run" not in boxes.sh(f"cat {root}/other-run-1/secret", i=1).output


@needs_bwrap
def test_local_another_prompts_files_are_unreachable(boxes):
    a, b = boxes.boxes
    boxes.tool("write_file", i=0, path="secret.txt", content="prompt A's secret")
    assert boxes.tool("read_file", i=0, path="secret.txt")[0]["content"] == "1|prompt A's secret"
    other = f"{a.cwd}/secret.txt"
    res = boxes.sh(f"cat {other}; ls {a.cwd}; echo x > {other}; ls /proc | grep -c '^[0-9]'", i=1)
    assert "prompt A's secret" not in res.output
    assert int(res.output.split()[-1]) <= 4  # only this command's own processes
    out, ok = boxes.tool("read_file", i=1, path=other)
    assert not ok and "not found" in out["error"]
    out, ok = boxes.tool("write_file", i=1, path=other, content="overwritten")
    assert not ok
    out, ok = boxes.tool("search_files", i=1, pattern="secret", path=a.cwd)
    assert out.get("total", 0) == 0
    assert Path(other).read_text() == "prompt A's secret"


# -- local sandbox: reads happen inside -------------------------------------------------------


@needs_bwrap
def test_local_proc_self_environ_through_a_symlink(boxes):
    """The runner's environment (API keys) never comes back: /proc/self is the sandboxed reader's."""
    runner_env = Path("/proc/self/environ").read_bytes().decode(errors="replace")
    assert env_keys(runner_env) - ALLOWED_ENV  # the control: the runner's own environment has more
    boxes.sh("ln -s /proc/self/environ env.txt; ln -s /proc/1/environ init.txt; ln -s /etc/shadow shadow.txt")
    out, ok = boxes.tool("read_file", path="env.txt")
    assert not ok and "binary" in out["error"] or env_keys(out["content"].replace("1|", "")) <= ALLOWED_ENV, out
    raw = boxes.loop.run_until_complete(boxes.boxes[0].read_file("env.txt")).decode()
    assert "PATH=" in raw and env_keys(raw) <= ALLOWED_ENV, raw
    for path in ("init.txt", "/proc/1/environ"):
        out, ok = boxes.tool("read_file", path=path)
        assert not ok or env_keys(out["content"]) <= ALLOWED_ENV, out
    out, ok = boxes.tool("patch", mode="replace", path="env.txt", old_string="PATH", new_string="X")
    assert not ok
    res = boxes.sh(
        f"cat /proc/self/environ /proc/$PPID/environ /proc/{os.getpid()}/environ 2>/dev/null | tr '\\0' '\\n'"
    )
    assert env_keys(res.output) <= ALLOWED_ENV, res.output
    out, ok = boxes.tool("read_file", path="shadow.txt")
    assert not ok and ("Permission denied" in out["error"] or "not found" in out["error"])


@needs_bwrap
def test_local_etc_shadow_is_unreadable(boxes):
    if AS_ROOT:
        assert Path("/etc/shadow").read_text()  # the control: the runner itself can read it
    for path in ("/etc/shadow", "/etc/gshadow"):
        out, ok = boxes.tool("read_file", path=path)
        assert not ok, out
    res = boxes.sh("cat /etc/shadow; head -c 1 /etc/shadow")
    assert res.exit_code != 0 and "root:" not in res.output
    out, ok = boxes.tool("search_files", pattern="root", path="/etc", file_glob="shadow")
    assert out.get("total", 0) == 0


@needs_bwrap
def test_local_execute_code_result_files_are_read_inside(tmp_path):
    b = Boxes(tmp_path / "sbx")
    try:
        code = (
            "import glob, os\n"
            "d = glob.glob('.hermes_exec_*')[0]\n"
            "os.remove(d + '/stderr')\n"
            "os.symlink('/proc/self/environ', d + '/stderr')\n"
            "os.symlink('/etc/shadow', d + '/result')\n"
        )
        out, _ = b.tool("execute_code", code=code)
        assert env_keys(out["stderr"]) <= ALLOWED_ENV, out
        assert not out["result"] or "root:" not in out["result"]
    finally:
        b.close()


@needs_bwrap
def test_local_proc_environ_end_to_end_keeps_the_secret_out_of_every_output(server, tmp_path):
    """Through run.py: a secret in the runner's environment reaches no file of the run."""
    secret = "sk-canary-" + os.urandom(8).hex()
    steal = (
        "import glob, os\n"
        "d = glob.glob('.hermes_exec_*')[0]\n"
        "os.symlink('/proc/self/environ', d + '/result')\n"
        "print('planted')\n"
    )

    def call(name: str, **arguments) -> dict:
        return {"reasoning": "r", "tool_calls": [{"name": name, "arguments": arguments}]}

    steps = [
        call("execute_code", code=steal),
        call("terminal", command="ln -s /proc/self/environ e"),
        call("read_file", path="e"),
        call("patch", mode="replace", path="e", old_string="=", new_string=":"),
        {"reasoning": "done", "content": "Done."},
    ]
    dataset = write_jsonl(tmp_path / "d.jsonl", [{"prompt": script(*steps, text="environ")}])
    run_dir = tmp_path / "run"
    args = base_overrides(server, tmp_path) + [
        "run_name=envleak", f"hydra.run.dir={run_dir}", f"dataset_file={dataset}",
        "distribution=terminal_only", "++distribution.toolsets.file=100", "++distribution.toolsets.code_execution=100",
    ]  # fmt: skip
    env = {**os.environ, "HERMES_CANARY_KEY": secret, "OPENAI_API_KEY": secret, "HYDRA_FULL_ERROR": "0"}
    res = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stdout + res.stderr
    rows = read_jsonl(run_dir / "trajectories.jsonl")
    tool_turns = [t["value"] for t in rows[0]["conversations"] if t["from"] == "tool"]
    assert len(tool_turns) == 4 and "planted" in tool_turns[0], tool_turns  # the attack ran
    assert "PATH=" in tool_turns[0]  # the result was read: the sandboxed reader's own environment
    for f in run_dir.rglob("*"):
        if f.is_file():
            assert secret not in f.read_text(errors="replace"), f


# -- local sandbox: limits --------------------------------------------------------------------


def fork_bomb(b) -> None:
    """A shell fork bomb in one of `b`'s sandboxes: it ends (the limit holds, or the command's timeout)."""
    res = b.sh("b() { b | b & }; b; sleep 3; echo still-here", timeout=8)
    assert "still-here" in res.output or "fork" in res.output or res.timed_out, res.output[-300:]


@needs_bwrap
def test_local_fork_bomb_is_bounded(tmp_path):
    b = Boxes(tmp_path / "sbx", pids_limit=64)
    try:
        t = time.monotonic()
        forks = (
            "import os, time\nn = 0\nfor i in range(300):\n    try:\n        pid = os.fork()\n"
            "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n"
            "    n += 1\nprint(n)\n"
        )
        b.tool("write_file", path="forks.py", content=forks)
        count = b.sh("python3 forks.py", timeout=20)
        assert 10 < int(count.output.split()[-1]) < 64, count.output
        fork_bomb(b)
        assert time.monotonic() - t < 40
        after = b.sh("echo alive")
        assert after.output.strip() == "alive"
    finally:
        b.close()
    if AS_ROOT:  # nothing of the prompt's uid is left on the host
        uid = b.boxes[0]._uid
        left = subprocess.run(["pgrep", "-U", str(uid)], capture_output=True, text=True).stdout.split()
        assert left == []


class HostProcs:
    """Samples the host's process count (numeric /proc entries) and a uid's, every 0.2 s, in a thread."""

    def __init__(self, uid: int | None):
        self.uid = uid
        self.host: list[int] = []
        self.of_uid: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            pids = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
            self.host.append(len(pids))
            if self.uid is not None:
                self.of_uid.append(len(procs_of_uid(self.uid, pids)))
            self._stop.wait(0.2)

    def __enter__(self) -> HostProcs:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def procs_of_uid(uid: int, pids: list[str] | None = None) -> list[int]:
    found = []
    for pid in pids if pids is not None else [e.name for e in os.scandir("/proc") if e.name.isdigit()]:
        try:
            with open(f"/proc/{pid}/status") as fp:
                uids = next(line for line in fp if line.startswith("Uid:")).split()[1:]
        except (OSError, StopIteration):
            continue
        if str(uid) in uids:
            found.append(int(pid))
    return found


def kill_uid(uid: int) -> None:
    """The test's last word: whatever of the prompt's uid is left is killed (a broken limit must not stay)."""
    for _ in range(50):
        left = procs_of_uid(uid)
        if not left:
            return
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def baseline_procs() -> int:
    return max(len([e for e in os.scandir("/proc") if e.name.isdigit()]) for _ in range(5))


@needs_bwrap
@pytest.mark.skipif(not AS_ROOT, reason="a prompt's uid of its own needs a root runner")
@pytest.mark.parametrize("kind", ["fork bomb", "2000-process flood"])
def test_local_process_floods_keep_the_host_bounded(tmp_path, kind):
    """The host's process count stays near its baseline + pids_limit, and nothing of the prompt's uid is left."""
    pids_limit = 64
    b = Boxes(tmp_path / "sbx", pids_limit=pids_limit)
    uid = b.boxes[0]._uid
    base = baseline_procs()
    try:
        with HostProcs(uid) as seen:
            if kind == "fork bomb":
                fork_bomb(b)
            else:
                flood = (
                    "import subprocess\nok = fail = 0\nps = []\nfor i in range(2000):\n    try:\n"
                    "        ps.append(subprocess.Popen(['sleep', '60']))\n    except OSError:\n        fail += 1\n"
                    "print('started', len(ps), 'refused', fail)\n"
                )
                b.tool("write_file", path="flood.py", content=flood)
                res = b.sh("python3 flood.py", timeout=60)
                started = int(res.output.split()[1])
                assert started < pids_limit and int(res.output.split()[3]) == 2000 - started, res.output
            assert b.sh("echo alive").output.strip() == "alive"  # the prompt goes on
            b.close()
            left_at_close = procs_of_uid(uid)  # close waits for the prompt's processes to be gone
        print(f"{kind}: host processes {base} before, max {max(seen.host)} during; uid max {max(seen.of_uid)}")
        assert max(seen.of_uid) <= pids_limit, seen.of_uid
        assert max(seen.host) <= base + pids_limit + 100, (base, max(seen.host))  # + other jobs of this host
        assert left_at_close == [] and b.backend.leftovers == 0
    finally:
        b.close()
        kill_uid(uid)


@needs_bwrap
@pytest.mark.skipif(not AS_ROOT, reason="a prompt's uid of its own needs a root runner")
def test_local_processes_that_outlive_their_prompt_are_killed_and_logged(tmp_path, caplog):
    """As if a cgroup could not be emptied: a process left in the prompt's cgroup (and of its uid) is killed."""
    b = Boxes(tmp_path / "sbx")
    box = b.boxes[0]
    uid = box._uid
    try:
        stray = subprocess.Popen(["sleep", "300"], user=uid, group=uid, extra_groups=[], start_new_session=True)
        for procs in box._cgroup:
            Path(procs).write_text(str(stray.pid))
        with caplog.at_level("ERROR"):
            b.close()
        assert stray.wait(timeout=10) == -signal.SIGKILL
        assert b.backend.leftovers == 1 and "outlived it" in caplog.text, caplog.text
        assert procs_of_uid(uid) == []
    finally:
        b.close()
        kill_uid(uid)


# -- local sandbox: disk --------------------------------------------------------------------

needs_mount = pytest.mark.skipif(not AS_ROOT, reason="the per-prompt tmpfs needs a root runner")


def mounts_below(path: Path) -> list[str]:
    from hermes_runner.sandbox.local.mounts import mounts_under

    return mounts_under(path)


@pytest.fixture
def small_fs():
    """A 512 MiB tmpfs of the test's own (any user may reach it): where a writer that a broken cap would let go
    fills nothing else."""
    from hermes_runner.sandbox.local.mounts import mount_tmpfs, unmount

    d = Path("/var/tmp") / f"hermes-small-{os.getpid()}-{time.time_ns()}"
    d.mkdir(mode=0o755)
    mount_tmpfs(d, 512 << 20)
    os.chmod(d, 0o777)
    try:
        yield d
    finally:
        unmount(d)
        d.rmdir()


@needs_bwrap
@needs_mount
def test_local_disk_limit_is_a_tmpfs_the_work_dir_and_tmp_share(tmp_path):
    b = Boxes(tmp_path / "sbx", disk_limit="64m", mem_limit="512m")
    try:
        assert b.backend.disk_tmpfs and b.boxes[0].mounted
        task = b.boxes[0]._taskdir
        assert os.path.ismount(task)
        res = b.sh("dd if=/dev/zero of=big bs=1M count=200 2>&1; echo rc=$?; stat -c %s big")  # one file
        assert "File size limit exceeded" in res.output and int(res.output.split()[-1]) == 64 << 20, res.output
        b.sh("rm big")
        res = b.sh("for f in a b c; do dd if=/dev/zero of=$f bs=1M count=40 2>&1; echo rc=$?; done; cat a b c | wc -c")
        written = int(res.output.split()[-1])
        print(f"tmpfs cap 64 MiB: {written} bytes written before ENOSPC")
        assert "No space left" in res.output and "rc=1" in res.output and written <= 64 << 20, res.output
        res = b.sh("head -c 1M /dev/zero > /tmp/more; echo rc=$?")  # /tmp is in the same cap
        assert "rc=1" in res.output and "No space left" in res.output, res.output
        out, ok = b.tool("write_file", path="more.txt", content="x" * (2 << 20))
        assert not ok and "No space left" in out["error"], out
        b.sh("rm a b c")
        res = b.sh("head -c 1M /dev/zero > /tmp/more; echo rc=$?")  # room again
        assert "rc=0" in res.output, res.output
        # many files: the inode count is bounded too (64 MiB / 4 KiB = 16384)
        res = b.sh("i=0; while [ $i -lt 20000 ]; do : > f$i || break; i=$((i+1)); done; echo made $i")
        assert int(res.output.split()[-1]) < 17000, res.output
    finally:
        b.close()
    assert mounts_below(tmp_path) == [] and not any((tmp_path / "sbx").iterdir())


async def _cycle(backend: LocalBackend, n: int) -> float:
    """Seconds per prompt sandbox made and removed, one after another."""
    t = time.perf_counter()
    for i in range(n):
        box = await backend.create(Prompt(i, f"c{i}", "p"))
        await box.close()
        await asyncio.gather(*backend._removals)
    return (time.perf_counter() - t) / n


@needs_bwrap
@needs_mount
def test_local_a_full_disk_leaves_the_prompt_its_memory(tmp_path):
    """The tmpfs's pages are charged to the prompt's memory cgroup: it holds mem_limit + disk_limit, so a prompt
    whose disk is full still has mem_limit for its processes (and can delete files)."""
    b = Boxes(tmp_path / "sbx", mem_limit="128m", disk_limit="128m")
    try:
        res = b.sh("for f in a b c; do head -c 60M /dev/zero > $f || echo full; done; cat a b c | wc -c")
        assert "No space left" in res.output and int(res.output.split()[-1]) <= 128 << 20, res.output
        res = b.sh("python3 -c \"x = b'x' * (96 << 20); print('ALLOC', len(x) >> 20)\"", timeout=60)
        assert "ALLOC 96" in res.output, res.output
        res = b.sh("python3 -c \"x = b'x' * (256 << 20); print('SURV' + 'IVED')\"", timeout=60)
        assert "SURVIVED" not in res.output and res.exit_code != 0, res.output  # mem_limit still holds
        assert b.sh("rm a b c && echo removed").output.strip() == "removed"
    finally:
        b.close()


@needs_bwrap
@needs_mount
def test_local_kept_dirs_are_copied_out_of_their_tmpfs(tmp_path):
    """sandbox.keep=true: a prompt's dir is kept on the disk, with what it held, and its tmpfs is gone."""
    cfg = SandboxConfig(keep=True)
    cfg.local.root = str(tmp_path / "sbx")
    loop = asyncio.new_event_loop()
    try:
        backend = LocalBackend(cfg, "kept")
        loop.run_until_complete(backend.start(set()))
        box = loop.run_until_complete(backend.create(Prompt(0, "k", "p")))
        loop.run_until_complete(box.run("echo kept > f; ln -s /etc/passwd link; echo t > /tmp/t", 20))
        task = box._taskdir
        assert os.path.ismount(task)
        loop.run_until_complete(box.close())
        loop.run_until_complete(backend.shutdown())
    finally:
        loop.close()
    assert mounts_below(tmp_path) == []
    assert (task / "work" / "f").read_text() == "kept\n" and (task / "tmp" / "t").read_text() == "t\n"
    assert os.readlink(task / "work" / "link") == "/etc/passwd"


@needs_bwrap
@needs_mount
def test_local_disk_limit_cost_per_prompt(tmp_path):
    """The tmpfs costs a mount and an unmount per prompt: measured against no cap."""
    both = {limit: Boxes(tmp_path / f"sbx-{limit}", n=0, disk_limit=limit) for limit in (None, "1g")}
    timings: dict[str | None, list[float]] = {None: [], "1g": []}
    try:
        for _ in range(5):  # interleaved, the best of each: the host's other jobs come and go
            for limit, b in both.items():
                timings[limit].append(b.loop.run_until_complete(_cycle(b.backend, 20)))
    finally:
        for b in both.values():
            b.close()
    timings = {k: min(v) for k, v in timings.items()}
    print(f"create + close of a prompt's sandbox: {timings[None] * 1e3:.2f} ms without a disk cap, "
          f"{timings['1g'] * 1e3:.2f} ms with its tmpfs")  # fmt: skip
    assert mounts_below(tmp_path) == []


@needs_bwrap
def test_local_row_cwd_is_capped_by_the_watchdog(tmp_path, small_fs):
    """A row's own cwd (a host dir) cannot take the tmpfs: its growth is watched, and the writer stopped."""
    cfg_root = tmp_path / "sbx"
    b = Boxes(cfg_root, n=0, disk_limit="32m")
    try:
        (small_fs / "existing").write_bytes(b"y" * (8 << 20))  # what it held before counts not
        box = b.loop.run_until_complete(b.backend.create(Prompt(0, "cwd", "p", cwd=str(small_fs))))
        b.boxes.append(box)
        b.ctxs.append(ToolContext(box, command_timeout_s=20, max_output_chars=50_000))
        assert box.cwd == str(small_fs) and box._watch
        # one file: RLIMIT_FSIZE stops it at the limit exactly
        res = b.sh("dd if=/dev/zero of=one bs=1M count=100 2>&1; echo rc=$?; stat -c %s one; rm one")
        assert "rc=0" not in res.output and "File size limit exceeded" in res.output, res.output
        assert int(res.output.split()[-1]) == 32 << 20, res.output
        # many files at the disk's speed: the watchdog stops the command
        writer = "i=0; while :; do head -c 1M /dev/zero > f$i || break; i=$((i+1)); done; echo never"
        res = b.sh(writer, timeout=60)
        held = sum(f.stat().st_size for f in small_fs.glob("f*"))
        print(f"watchdog, cap 32 MiB: {held} bytes written before the command was stopped")
        assert "disk limit hit" in res.output and res.exit_code != 0 and "never" not in res.output, res.output
        assert held > 32 << 20  # (and under the 512 MiB of small_fs: a writer never stopped would fill it)
        assert "disk limit hit" in b.sh("sleep 5; echo done", timeout=20).output  # still over: stopped again
        out, ok = b.tool("write_file", path="note.txt", content="x")
        assert not ok and "disk limit hit" in out["error"], out
        b.sh("rm -f f*")
        assert b.sh("sleep 0.5; echo done").output.strip() == "done"  # room again
    finally:
        b.close()


UNPRIVILEGED_RUNNER = """
import asyncio, json, sys
from hermes_runner.config import SandboxConfig
from hermes_runner.dataset import Prompt
from hermes_runner.sandbox.local.backend import LocalBackend

async def main():
    cfg = SandboxConfig()
    cfg.local.root = sys.argv[1]
    cfg.local.disk_limit = "32m"
    b = LocalBackend(cfg, "nobody")
    await b.start(set())
    box = await b.create(Prompt(0, "k", "p"))
    out = {"tmpfs": b.disk_tmpfs, "watch": [str(d) for d, _ in box._watch]}
    # 30 MiB hidden in a dir the command makes unreadable, then 5 MiB more: 35 MiB in all, over the cap
    hide = await box.run("mkdir h; for i in $(seq 30); do head -c 1M /dev/zero > h/f$i; done; chmod 000 h", 30)
    out["hide"] = hide.output
    out["over"] = (await box.run("head -c 5M /dev/zero > g; sleep 3; echo slept", 30)).output
    await box.run("chmod 700 h; rm -rf h g", 30)
    writer = "i=0; while :; do head -c 1M /dev/zero > /tmp/f$i || break; i=$((i+1)); done; echo never"
    out["writer"] = (await box.run(writer, 60)).output
    out["held"] = (await box.run("cat /tmp/f* | wc -c", 30)).output
    out["seccomp"] = (await box.run("grep Seccomp: /proc/self/status; unshare -U true; echo rc=$?", 30)).output
    await box.close()
    await b.shutdown()
    print(json.dumps(out))

asyncio.run(main())
"""


@needs_bwrap
@pytest.mark.skipif(not AS_ROOT, reason="runs a runner as nobody, which takes root")
def test_local_unprivileged_runner_keeps_the_disk_limit_by_a_watchdog(tmp_path, small_fs):
    """A runner without root cannot mount a tmpfs: the watchdog stops the writer, even of files it hid."""
    python = shutil.which("python3", path="/usr/bin:/bin")  # the venv's interpreter may be under 0700 /root
    ok = python and subprocess.run(
        [python, "-c", f"import sys; sys.exit(sys.version_info[:2] != {sys.version_info[:2]})"]
    )
    if not ok or ok.returncode:
        pytest.skip("no system python3 of this version to run the unprivileged runner with")
    site = next(p for p in sys.path if p.endswith("site-packages"))
    root = small_fs / "sbx"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(small_fs), "PYTHONPATH": f"{ROOT}:{site}"}
    res = subprocess.run(
        ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", python, "-c", UNPRIVILEGED_RUNNER,
         str(root)], env=env, capture_output=True, text=True, timeout=180, cwd="/",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.splitlines()[-1])
    assert not out["tmpfs"] and len(out["watch"]) == 1, out
    assert "disk limit hit" not in out["hide"], out
    assert "disk limit hit" in out["over"] and "slept" not in out["over"], out  # the hidden 30 MiB counted
    assert "disk limit hit" in out["writer"] and "never" not in out["writer"], out
    held = int(out["held"].split()[0])
    print(f"unprivileged runner, watchdog, cap 32 MiB: {held} bytes written before the command was stopped")
    assert held > 32 << 20
    assert "Seccomp:\t2" in out["seccomp"] and "rc=0" not in out["seccomp"], out
    assert not any(root.iterdir())  # (the run's dir removed at its end)


@needs_bwrap
@needs_mount
def test_local_killed_runners_mounts_go_with_it(tmp_path):
    """kill -9 of a runner's whole process group: its watchdog unmounts its prompts' tmpfs and removes its dir."""
    root = tmp_path / "sbx"
    code = (
        "import asyncio, sys, time\n"
        "from hermes_runner.config import SandboxConfig\nfrom hermes_runner.dataset import Prompt\n"
        "from hermes_runner.sandbox.local.backend import LocalBackend\n"
        "async def main():\n"
        "    cfg = SandboxConfig(); cfg.local.root = sys.argv[1]\n"
        "    b = LocalBackend(cfg, 'dead'); await b.start(set())\n"
        "    boxes = [await b.create(Prompt(i, f'k{i}', 'p')) for i in range(3)]\n"
        "    await boxes[0].run('echo data > f; sleep 300 &', 20)\n"
        "    print(boxes[0]._taskdir, flush=True); time.sleep(300)\n"
        "asyncio.run(main())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    dead = subprocess.Popen(
        [sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        task = Path(dead.stdout.readline().strip())
        assert os.path.ismount(task) and len(mounts_below(task.parent)) == 3, task
        os.killpg(dead.pid, signal.SIGKILL)
        dead.wait(timeout=30)
        deadline = time.monotonic() + 30
        while (mounts_below(root) or task.parent.exists()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mounts_below(root) == [] and not task.parent.exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(dead.pid, signal.SIGKILL)
        from hermes_runner.sandbox.local.mounts import unmount

        for m in mounts_below(tmp_path):
            unmount(m)


@needs_bwrap
@needs_mount
def test_local_reaper_unmounts_a_dead_runners_mounts_and_never_removes_through_one(tmp_path):
    """A dead runner's dir whose mounts are still there (its watchdog died too): the next runner's start-up
    cleanup unmounts them before it removes anything, and a host dir mounted inside keeps its files."""
    from hermes_runner.sandbox.local.mounts import mount_tmpfs, unmount

    root = tmp_path / "sbx"
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = root / f"dead-{gone.pid}"
    (dead / "task").mkdir(parents=True)
    (dead / MARKER).write_text(json.dumps({"pid": gone.pid, "start": "1", "host": os.uname().nodename}))
    host = tmp_path / "host-dir"
    host.mkdir()
    (host / "precious").write_text("keep me")
    try:
        mount_tmpfs(dead / "task", 1 << 20)
        (dead / "task" / "bound").mkdir()
        subprocess.run(["mount", "--bind", str(host), str(dead / "task" / "bound")], check=True)
        Boxes(root, n=0).close()
        assert not dead.exists() and mounts_below(root) == []
        assert (host / "precious").read_text() == "keep me"
    finally:
        for m in mounts_below(tmp_path):
            unmount(m)


@needs_bwrap
@needs_mount
def test_local_reaper_copies_a_dead_kept_runs_tmpfs_to_the_disk(tmp_path):
    """sandbox.keep=true, runner and watchdog both killed: the next runner's start-up cleanup copies each prompt's
    tmpfs to the disk and unmounts it (no mount is left behind), and keeps the dir with what the prompt wrote."""
    from hermes_runner.sandbox.local.mounts import mount_tmpfs, unmount

    root = tmp_path / "sbx"
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = root / f"kept-{gone.pid}"
    (dead / "task").mkdir(parents=True)
    info = {"pid": gone.pid, "start": "1", "host": os.uname().nodename, "keep": True}
    (dead / MARKER).write_text(json.dumps(info))
    try:
        mount_tmpfs(dead / "task", 1 << 20)
        (dead / "task" / "work").mkdir()
        (dead / "task" / "work" / "answer.txt").write_text("42")
        Boxes(root, n=0).close()
        assert mounts_below(root) == []
        assert (dead / "task" / "work" / "answer.txt").read_text() == "42"
    finally:
        for m in mounts_below(tmp_path):
            unmount(m)


def test_local_disk_limit_is_parsed_like_mem_limit(tmp_path):
    with pytest.raises(ConfigError, match="sandbox.local.disk_limit"):
        Boxes(tmp_path / "sbx", disk_limit="lots")


# -- local sandbox: seccomp -------------------------------------------------------------------

SYSCALLS = (
    "import ctypes, os, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "def call(name, nr, *args):\n"
    "    r = libc.syscall(nr, *args)\n"
    "    print(name, r, os.strerror(ctypes.get_errno()) if r == -1 else 'ok')\n"
    "call('add_key', 248, b'user', b'hermes', b'v', 1, ctypes.c_long(-3))\n"  # KEY_SPEC_SESSION_KEYRING
    "call('request_key', 249, b'user', b'hermes', None, 0)\n"
    "call('keyctl', 250, 0, ctypes.c_long(-3), 0)\n"  # KEYCTL_GET_KEYRING_ID
    "call('unshare', 272, 0x10000000)\n"  # CLONE_NEWUSER
    "call('mount', 165, b'none', b'/tmp', b'tmpfs', 0, None)\n"
    "call('ptrace', 101, 16, 1, 0, 0)\n"  # PTRACE_ATTACH to pid 1
    "call('bpf', 321, 0, None, 0)\n"
    "call('perf_event_open', 298, None, 0, -1, -1, 0)\n"
    "call('userfaultfd', 323, 0)\n"
    "r = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)\n"  # clone(CLONE_NEWUSER | SIGCHLD): a fork, if allowed
    "if r == 0:\n    os._exit(0)\n"
    "print('clone_newuser', r, os.strerror(ctypes.get_errno()) if r == -1 else 'ok')\n"
)


@needs_bwrap
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers of x86_64")
def test_local_seccomp_denies_keyrings_namespaces_mounts_and_ptrace(boxes):
    boxes.tool("write_file", path="sys.py", content=SYSCALLS)
    res = boxes.sh("python3 sys.py")
    got = {line.split()[0]: line.split(" ", 2)[2] for line in res.output.splitlines() if line}
    assert set(got) == {"add_key", "request_key", "keyctl", "unshare", "mount", "ptrace", "bpf",
                        "perf_event_open", "userfaultfd", "clone_newuser"}, res.output  # fmt: skip
    assert all(v == "Operation not permitted" for v in got.values()), got
    for cmd in ("unshare -U true", "unshare -m true", "strace -f true"):
        if shutil.which(cmd.split()[0]):
            assert boxes.sh(cmd).exit_code != 0, cmd
    assert "Seccomp:\t2" in boxes.sh("grep Seccomp: /proc/self/status").output


@needs_bwrap
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers of x86_64")
def test_local_seccomp_is_what_denies_the_keyring(tmp_path):
    """The control: without the filter (seccomp=false) the same add_key succeeds, as in the sweep."""
    b = Boxes(tmp_path / "sbx", seccomp=False)
    try:
        b.tool("write_file", path="sys.py", content=SYSCALLS)
        res = b.sh("python3 sys.py; grep Seccomp: /proc/self/status")
        assert res.output.splitlines()[0].endswith(" ok"), res.output
        assert "Seccomp:\t0" in res.output
    finally:
        b.close()


@needs_bwrap
def test_local_ordinary_commands_work_under_seccomp(boxes):
    checks = {
        "python3 -c 'import multiprocessing as m; print(m.Pool(2).map(abs, [-1, -2]))'": "[1, 2]",
        "bash -c 'echo $((6 * 7))'": "42",
        "python3 -m pip --version": "pip ",
        "git init -q r && cd r && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m m && git log --oneline | wc -l": "1",
        "sleep 0.1 & wait; echo waited": "waited",
    }  # fmt: skip
    if shutil.which("gcc"):
        checks["printf '#include <stdio.h>\\nint main(){puts(\"built\");}' > m.c && gcc m.c -o m && ./m"] = "built"
    for cmd, want in checks.items():
        res = boxes.sh(cmd, timeout=60)
        assert res.exit_code == 0 and want in res.output, (cmd, res.output)


def test_local_refuses_to_start_without_its_seccomp_filter_unless_opted_out(tmp_path, monkeypatch):
    if not HAS_BWRAP:
        pytest.skip("bubblewrap not installed")
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # the package is not installed
    with pytest.raises(ConfigError, match="seccomp filter cannot be built.*sandbox.local.seccomp=false"):
        Boxes(tmp_path / "sbx")
    Boxes(tmp_path / "sbx2", seccomp=False).close()


@needs_bwrap
def test_local_memory_hog_is_bounded(tmp_path):
    b = Boxes(tmp_path / "sbx", mem_limit="128m", disk_limit="64m")  # (the cgroup holds both: 192 MiB)
    try:
        res = b.sh("python3 -c \"x = b'x' * (1 << 30); print('SURV' + 'IVED', len(x))\"", timeout=60)
        assert res.exit_code != 0 and "SURVIVED" not in res.output, res.output
        assert b.sh("echo alive").output.strip() == "alive"
    finally:
        b.close()


@needs_bwrap
def test_local_limits_are_set_in_cgroups_where_available(tmp_path):
    b = Boxes(tmp_path / "sbx", pids_limit=77, mem_limit="300m", cpus=0.5, disk_limit="200m")
    try:
        cg = b.backend.cgroups
        if cg is None:
            pytest.skip("no writable cgroup hierarchy here: rlimits only")
        procs = [Path(p) for p in b.boxes[0]._cgroup]
        values = {f.name: f.read_text().strip() for p in procs for f in p.parent.iterdir() if f.name in {
            "pids.max", "memory.limit_in_bytes", "memory.max", "cpu.cfs_quota_us", "cpu.max"}}  # fmt: skip
        assert values.get("pids.max") == "77"
        memory = (300 + 200 if b.backend.disk_tmpfs else 300) << 20  # the tmpfs's files are in memory too
        assert (values.get("memory.limit_in_bytes") or values.get("memory.max")) == str(memory)
        assert values.get("cpu.cfs_quota_us", values.get("cpu.max", "").split(" ")[0]) == "50000"
        runner = {str(os.getpid())}  # cgroup v1: the runner thread that forks the prompt's commands is in it

        def joined() -> set[str]:
            return {pid for p in procs for pid in p.read_text().split()} - runner

        async def during() -> set[str]:
            go = Path(b.boxes[0].cwd) / "go"  # the command waits for it: seen in its cgroups however slow its start
            cmd = asyncio.ensure_future(b.boxes[0].run("sleep 30 & while [ ! -e go ]; do sleep 0.05; done", 20))
            inside = await asyncio.to_thread(wait_for, lambda: len(joined()) >= 2 and joined(), 15, "the command")
            go.touch()
            await cmd
            return inside

        inside = b.loop.run_until_complete(during())
        assert len(inside - runner) >= 2, inside  # the command, its background job, bubblewrap
        left = {pid for p in procs for pid in p.read_text().split()}
        assert left <= runner, left  # all gone with the command, the background job too
    finally:
        b.close()


@needs_bwrap
def test_local_huge_command_goes_through_stdin(boxes):
    payload = "y" * BIG
    res = boxes.sh(f"x='{payload}'; echo ${{#x}}")
    assert res.exit_code == 0 and res.output.strip() == str(BIG), res.output[:300]
    out, ok = boxes.tool("terminal", command=f"printf %s '{payload}' | wc -c")
    assert ok and out["output"].strip() == str(BIG)


@pytest.mark.parametrize("pidfd", [True, False])
def test_local_huge_command_unconfined(tmp_path, monkeypatch, pidfd):
    from hermes_runner.sandbox.local import spawn

    monkeypatch.setattr(spawn, "PIDFD", pidfd and spawn.PIDFD)  # False: asyncio's subprocesses
    b = Boxes(tmp_path / "sbx", isolation="none")
    try:
        res = b.sh(f"x='{'z' * BIG}'; echo ${{#x}}")
        assert res.output.strip() == str(BIG)
    finally:
        b.close()


@pytest.mark.parametrize("isolation", ["bwrap", "none"])
def test_local_file_writes_finish_before_the_helper_is_reaped(tmp_path, isolation):
    """The write helper closes its stdout before it copies stdin to the file: a large write is waited for,
    not killed half-way (it failed as `cannot write ...: unknown error`, now and then with small files)."""
    b = Boxes(tmp_path / "sbx", isolation=isolation)
    try:
        data = "0123456789abcdef" * (1 << 20)  # 16 MiB
        for i in range(3):
            out, ok = b.tool("write_file", path=f"big{i}.txt", content=data)
            assert ok, out
            assert b.sh(f"wc -c < big{i}.txt").output.strip() == str(len(data))
    finally:
        b.close()


# -- local sandbox: start-up ------------------------------------------------------------------


def test_local_refuses_to_start_unconfined_unless_opted_out(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no bwrap, no setpriv on this PATH
    with pytest.raises(ConfigError, match="bubblewrap is not installed.*isolation=none"):
        Boxes(tmp_path / "sbx")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    b = Boxes(tmp_path / "sbx2", isolation="none")  # the explicit opt-out runs
    try:
        assert b.sh("echo unconfined").output.strip() == "unconfined"
    finally:
        b.close()


def test_reaper_removes_only_dirs_it_marked(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    important = shared / "important-99999"
    important.mkdir()
    (important / "data").write_text("keep me")
    # a dead runner's dir (with our marker), a live runner's, and a forged marker that is a symlink
    dead = shared / "old-run-99998"
    dead.mkdir()
    (dead / MARKER).write_text(json.dumps({"pid": 99998, "start": "1", "host": os.uname().nodename}))
    live = shared / "live-run-1"
    live.mkdir()
    from hermes_runner.sandbox.base import process_start

    me = {"pid": os.getpid(), "start": process_start(os.getpid()), "host": os.uname().nodename}
    (live / MARKER).write_text(json.dumps(me))
    forged = shared / "forged-99997"
    forged.mkdir()
    (tmp_path / "m").write_text(json.dumps({"pid": 99997, "start": "1", "host": os.uname().nodename}))
    (forged / MARKER).symlink_to(tmp_path / "m")
    b = Boxes(shared, isolation="none")
    b.close()
    assert (important / "data").read_text() == "keep me"
    assert not dead.exists() and live.exists() and forged.exists()


@pytest.mark.parametrize("name", ["../../escape", "a/b/../../../up", "..", "/abs/path", ".hidden"])
def test_run_name_cannot_leave_the_sandbox_root(tmp_path, name):
    root = tmp_path / "deep" / "root"
    b = Boxes(root, run_name=name, isolation="none")
    try:
        made = Path(b.boxes[0].cwd).resolve()
        assert root.resolve() in made.parents
        assert b.backend._dir.parent == root
    finally:
        b.close()
    assert sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["root"]


# -- file tools -------------------------------------------------------------------------------


def test_patch_reports_a_failed_delete(boxes):
    delete = "*** Begin Patch\n*** Delete File: {}\n*** End Patch"
    out, ok = boxes.tool("patch", mode="patch", patch=delete.format("missing.txt"))
    assert not ok and "cannot delete missing.txt" in out["error"], out
    out, ok = boxes.tool("patch", mode="patch", patch=delete.format("/etc/hostname"))
    assert not ok and "cannot delete" in out["error"]
    assert Path("/etc/hostname").exists()
    boxes.tool("write_file", path="d/f.txt", content="x")
    out, ok = boxes.tool("patch", mode="patch", patch=delete.format("d"))
    assert not ok and "is a directory" in out["error"]
    out, ok = boxes.tool("patch", mode="patch", patch=delete.format("d/f.txt"))
    assert ok and not boxes.tool("read_file", path="d/f.txt")[1]


# -- Docker -----------------------------------------------------------------------------------

docker_only = pytest.mark.docker


def _docker_run(tmp_path, commands, opts=None, image=None, tools=()):
    from hermes_runner.sandbox.docker.backend import DockerBackend

    img = image or BASE
    cfg = SandboxConfig(backend="docker", image=img, docker=opts or DockerSandboxOptions(pool_size=0))
    return asyncio.run(two_prompts(DockerBackend(cfg, "esc", str(tmp_path / "esc")), img, commands, tools))


@docker_only
def test_docker_escapes_are_blocked(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_CANARY_KEY", "sk-docker-canary")
    commands = [
        "mount -o remount,rw / && echo REMOUNTED",
        "touch /etc/x && echo WROTE",
        "ls /var/run/docker.sock /run/docker.sock 2>&1",
        "grep CapEff /proc/self/status",
        "ln -s /proc/self/environ env.txt; ln -s /proc/1/environ init.txt; cat /proc/1/environ | tr '\\0' '\\n'",
        "echo secret-of-a > mine.txt",
        f"x='{'q' * BIG}'; echo ${{#x}}",
    ]
    tools = [
        ("a", "read_file", {"path": "env.txt"}),
        ("a", "read_file", {"path": "init.txt"}),
        ("a", "read_file", {"path": "/var/run/docker.sock"}),
        ("b", "read_file", {"path": "/workspace/mine.txt"}),
        ("b", "terminal", {"command": "cat /workspace/mine.txt; ls /workspace"}),
    ]
    out, results = _docker_run(tmp_path, commands, tools=tools)
    remount, touch, sock, caps, environ, _, big = out
    # The fork bomb in a container of its own: its processes linger there at the pids limit for a while.
    (bomb,), _ = _docker_run(tmp_path / "bomb", ["b() { b | b & }; b; sleep 2; echo still-here"])
    assert "REMOUNTED" not in remount.output and remount.exit_code != 0
    assert "WROTE" not in touch.output and "Read-only" in touch.output
    assert "No such file" in sock.output
    assert caps.output.split() == ["CapEff:", "0000000000000000"]
    assert "sk-docker-canary" not in environ.output and env_keys(environ.output) <= ALLOWED_ENV
    assert "still-here" in bomb.output or "can't fork" in bomb.output or bomb.timed_out  # bounded by pids_limit
    assert subprocess.run(["true"]).returncode == 0  # and the host still forks
    assert big.exit_code == 0 and big.output.strip() == str(BIG), big.output[:200]
    (env_a, ok1), (init_a, _), (sock_a, ok3), (other, ok4), (other_term, _) = results
    assert "sk-docker-canary" not in json.dumps(env_a)
    assert (not ok1 and "binary" in env_a["error"]) or env_keys(env_a["content"]) <= ALLOWED_ENV
    assert "sk-docker-canary" not in json.dumps(init_a)
    assert not ok3 and not ok4 and "secret-of-a" not in other_term["output"]


@docker_only
def test_docker_memory_hog_is_bounded(engine, tmp_path):
    (hog,), _ = _docker_run(
        tmp_path,
        ["awk 'BEGIN { s = \"x\"; while (1) s = s s }'; echo rc=$?"],
        opts=DockerSandboxOptions(pool_size=0, mem_limit="64m"),
    )
    assert "rc=0" not in hog.output


@docker_only
def test_docker_default_image_runs_as_non_root_and_cannot_read_shadow(engine, tmp_path):
    image = "local/bookworm:ci"
    try:
        engine.images.get(image)
    except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound
        pytest.skip(f"{image} not built (WITH_DEBIAN=0)")
    (who, shadow), results = _docker_run(
        tmp_path,
        ["id -u", "cat /etc/shadow"],
        opts=DockerSandboxOptions(pool_size=0),
        image=image,
        tools=[("a", "read_file", {"path": "/etc/shadow"})],
    )
    assert who.output.strip() != "0", who.output
    assert shadow.exit_code != 0 and "root:" not in shadow.output
    assert not results[0][1] and "Permission denied" in results[0][0]["error"]


@docker_only
def test_killed_runners_containers_end_without_a_resume(engine, server, tmp_path):
    """kill -9 of the runner: its watchdog removes the containers; nobody runs that run dir again."""
    _cli = docker_tests._cli
    containers_of, sh = docker_tests.containers_of, docker_tests.sh

    rows = [
        {"prompt": script(sh("echo started; sleep 120", timeout=200), {"content": "x"}, text=f"k{i}")} for i in range(2)
    ]
    dataset = write_jsonl(tmp_path / "d.jsonl", rows)
    run_dir = tmp_path / "run"
    with LiveRunner(_cli(server, tmp_path, run_dir, dataset), start_new_session=True) as runner:
        runner.wait_for(lambda: len(containers_of(engine, run_dir)) >= 2, 60, "two containers")
        time.sleep(0.5)
        os.killpg(runner.proc.pid, 9)  # the runner and its whole process group
        runner.proc.wait(timeout=30)
        wait_for(lambda: containers_of(engine, run_dir) == [], 30, "the containers to be removed", interval=0.2)


@docker_only
def test_any_runner_reaps_containers_of_dead_runners(engine, tmp_path):
    """A container of a dead runner of ANOTHER run dir is removed when any runner starts."""
    from hermes_runner.sandbox.docker import orphans as docker_orphans
    from hermes_runner.sandbox.docker.backend import DockerBackend

    dead = subprocess.Popen(["true"])
    dead.wait()
    labels = docker_orphans.runner_labels("gone", str(tmp_path / "elsewhere"))
    labels[docker_orphans.RUNNER_PID] = str(dead.pid)
    labels[docker_orphans.KEEP] = "0"
    c = engine.containers.run(BASE, ["sleep", "300"], detach=True, labels=labels, network_mode="none")
    try:

        async def go():
            backend = DockerBackend(SandboxConfig(backend="docker", image=BASE), "any", str(tmp_path / "other"))
            await backend.start({BASE})
            await backend.shutdown()

        asyncio.run(go())
        import docker

        with pytest.raises(docker.errors.NotFound):
            engine.containers.get(c.id)
    finally:
        import contextlib

        with contextlib.suppress(Exception):
            c.remove(force=True)
