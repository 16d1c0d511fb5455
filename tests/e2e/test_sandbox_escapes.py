"""Escape attempts against both sandboxes, as a model's commands would make them (run as root in CI).

Local: bubblewrap + an unprivileged per-prompt uid + cgroups (docs/sandboxes.md). Docker: the
backend's defaults. The Docker half needs an engine and skips without one, unless
HERMES_REQUIRE_DOCKER=1 (as in tests/e2e/test_docker_sandbox.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_runner.config import DockerSandboxOptions, SandboxConfig
from hermes_runner.dataset import Prompt
from hermes_runner.errors import ConfigError, ToolError
from hermes_runner.sandbox.base import SAFE_ENV_KEYS
from hermes_runner.sandbox.local import MARKER, LocalBackend
from hermes_runner.tools.base import ToolContext
from hermes_runner.tools.catalog import all_tools

import tests.e2e.test_docker_sandbox as docker_tests
from tests.helpers.containers import two_prompts
from tests.helpers.run import ROOT, LiveRunner, base_overrides, read_jsonl, script, write_jsonl

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
        bomb = b.sh("b() { b | b & }; b; sleep 3; echo still-here", timeout=8)
        assert time.monotonic() - t < 40
        assert "still-here" in bomb.output or "fork" in bomb.output or bomb.timed_out, bomb.output[-300:]
        after = b.sh("echo alive")
        assert after.output.strip() == "alive"
    finally:
        b.close()
    if AS_ROOT:  # nothing of the prompt's uid is left on the host
        uid = b.boxes[0]._uid
        left = subprocess.run(["pgrep", "-U", str(uid)], capture_output=True, text=True).stdout.split()
        assert left == []


@needs_bwrap
def test_local_memory_hog_is_bounded(tmp_path):
    b = Boxes(tmp_path / "sbx", mem_limit="128m")
    try:
        res = b.sh("python3 -c \"x = b'x' * (1 << 30); print('SURV' + 'IVED', len(x))\"", timeout=60)
        assert res.exit_code != 0 and "SURVIVED" not in res.output, res.output
        assert b.sh("echo alive").output.strip() == "alive"
    finally:
        b.close()


@needs_bwrap
def test_local_limits_are_set_in_cgroups_where_available(tmp_path):
    b = Boxes(tmp_path / "sbx", pids_limit=77, mem_limit="300m", cpus=0.5)
    try:
        cg = b.backend.cgroups
        if cg is None:
            pytest.skip("no writable cgroup hierarchy here: rlimits only")
        procs = [Path(p) for p in b.boxes[0]._cgroup]
        values = {f.name: f.read_text().strip() for p in procs for f in p.parent.iterdir() if f.name in {
            "pids.max", "memory.limit_in_bytes", "memory.max", "cpu.cfs_quota_us", "cpu.max"}}  # fmt: skip
        assert values.get("pids.max") == "77"
        assert (values.get("memory.limit_in_bytes") or values.get("memory.max")) == str(300 << 20)
        assert values.get("cpu.cfs_quota_us", values.get("cpu.max", "").split(" ")[0]) == "50000"
        runner = {str(os.getpid())}  # cgroup v1: the runner thread that forks the prompt's commands is in it

        async def during() -> set[str]:
            cmd = asyncio.ensure_future(b.boxes[0].run("sleep 30 & sleep 2", 20))
            await asyncio.sleep(1)
            inside = {pid for p in procs for pid in p.read_text().split()}
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
    from hermes_runner.sandbox import spawn

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
    from hermes_runner.sandbox.docker import DockerBackend

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
    _cli, _wait_for = docker_tests._cli, docker_tests._wait_for
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
        _wait_for(lambda: containers_of(engine, run_dir) == [], 30, "the containers to be removed")


@docker_only
def test_any_runner_reaps_containers_of_dead_runners(engine, tmp_path):
    """A container of a dead runner of ANOTHER run dir is removed when any runner starts."""
    from hermes_runner.sandbox import docker_orphans
    from hermes_runner.sandbox.docker import DockerBackend

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
