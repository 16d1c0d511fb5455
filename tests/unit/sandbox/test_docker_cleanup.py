"""A container the engine cannot remove (no engine needed: a fake of its API, real processes): its processes are
killed from the host, the prompt's close fails with ContainerNotRemoved; and what the options leave unbounded."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from docker.errors import APIError, NotFound

from hermes_runner.config import DockerExecMode, DockerSandboxOptions, SandboxConfig
from hermes_runner.errors import ConfigError, ContainerNotRemoved
from hermes_runner.sandbox.docker import exec as docker_exec
from hermes_runner.sandbox.docker import orphans as docker_orphans
from hermes_runner.sandbox.docker import procs as docker_procs
from hermes_runner.sandbox.docker.backend import DockerBackend, DockerSandbox

CID = "f00d" * 16  # a container id (64 hex digits)


class _Response:
    def __init__(self, status: int, reason: str):
        self.status_code, self.reason = status, reason


class _StuckEngine:
    """The containers API of an engine that fails to remove a container (`failures` times, then removes it),
    as rootless Podman did when the container's processes had exhausted its uid's process limit."""

    def __init__(self, failures: int, init: int | None = None):
        self.failures, self.init, self.calls = failures, init, 0
        self.api = self

    def remove_container(self, cid, v, force):
        self.calls += 1
        if self.calls <= self.failures:
            raise APIError(
                "500 Server Error", _Response(500, "Internal Server Error"), "runc: resource temporarily unavailable"
            )

    def inspect_container(self, cid):
        if self.calls > self.failures:
            raise NotFound("no such container")
        return {"State": {"Pid": self.init or 0}}


@pytest.fixture
def engine_process(tmp_path):
    """A process named like Podman's conmon for the container CID, with a child and a grandchild (the container's
    processes, which also fork now and then); yields (the conmon-like process, the file its children's pids go to)."""
    conmon = tmp_path / "conmon"
    shutil.copy("/bin/sh", conmon)
    pids = tmp_path / "pids"
    script = f"sh -c 'echo $$ >> {pids}; while :; do sleep 0.05; done' & sleep 300 & echo $! >> {pids}; wait"
    proc = subprocess.Popen([str(conmon), "-c", script, "conmon", "-c", CID])
    try:
        end = time.monotonic() + 30
        while not (pids.exists() and len(pids.read_text().split()) == 2):
            assert time.monotonic() < end, "the fake container's processes did not start"
            time.sleep(0.01)
        yield proc, pids
    finally:
        for pid in [proc.pid, *_pids(pids)]:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        proc.wait()


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    return docker_procs._alive(pid)


def test_the_processes_of_a_container_the_engine_cannot_remove_are_killed(engine_process):
    proc, pids = engine_process
    children = _pids(pids)
    assert docker_procs.container_pids(CID) >= set(children)
    assert proc.pid not in docker_procs.container_pids(CID)  # the engine's own process is not the container's
    api = _StuckEngine(failures=1)
    with pytest.raises(ContainerNotRemoved) as err:
        docker_orphans.remove(api, CID)
    text = str(err.value)
    assert text.startswith(f"container {CID[:12]} could not be removed (runc: resource temporarily unavailable)")
    assert "killed" in text and "then removed" in text, text
    assert not any(_alive(p) for p in children)
    assert docker_procs.container_pids(CID) == set()


def test_a_container_still_there_after_the_kill_says_so(engine_process):
    _, pids = engine_process
    with pytest.raises(ContainerNotRemoved, match="it is still there .*the next run's start removes it"):
        docker_orphans.remove(_StuckEngine(failures=2), CID)
    assert not any(_alive(p) for p in _pids(pids))


def test_removal_that_works_is_quiet():
    api = _StuckEngine(failures=0)
    docker_orphans.remove(api, CID)
    assert api.calls == 1


def test_the_prompts_close_fails_when_its_container_cannot_be_removed(engine_process, tmp_path):
    _, pids = engine_process
    opts = DockerSandboxOptions(exec_mode=DockerExecMode.exec, pool_size=0)
    backend = DockerBackend(SandboxConfig(backend="docker", image="x", docker=opts), "rm", str(tmp_path / "run"))
    backend.client = _StuckEngine(failures=5)

    async def main() -> None:
        sandbox = DockerSandbox(backend, CID, "/workspace")
        backend._live.add(CID)
        with pytest.raises(ContainerNotRemoved, match="could not be removed"):
            await sandbox.close()
        assert CID not in backend._live

    asyncio.run(main())
    assert not any(_alive(p) for p in _pids(pids))


def _backend(tmp_path, **opts) -> DockerBackend:
    cfg = SandboxConfig(backend="docker", image="x", docker=DockerSandboxOptions(**opts))
    return DockerBackend(cfg, "b", str(tmp_path / "run"))


def test_the_defaults_bound_everything(tmp_path):
    assert _backend(tmp_path).unbounded() == []
    _backend(tmp_path).check_bounds()
    assert _backend(tmp_path, volumes=["/data:/data:ro"]).unbounded() == []


@pytest.mark.parametrize(
    ("opts", "says"),
    [
        ({"mem_limit": None}, "memory (sandbox.docker.mem_limit is not set)"),
        ({"read_only": False}, "disk (sandbox.docker.read_only=false"),
        ({"tmpfs": {"/tmp": "rw,mode=1777"}}, "the tmpfs at /tmp has no size="),
        ({"workdir_tmpfs": "rw,exec"}, "the tmpfs at the working dir has no size="),
        ({"volumes": ["/srv/cache:/cache"]}, "sandbox.docker.volumes '/srv/cache:/cache' is writable"),
    ],
)
def test_what_is_unbounded_stops_the_run_unless_allowed(tmp_path, caplog, opts, says):
    with pytest.raises(ConfigError) as err:
        _backend(tmp_path, **opts).check_bounds()
    text = str(err.value)
    assert "\n" not in text and says in text and "sandbox.docker.allow_unbounded=true" in text, text
    _backend(tmp_path, allow_unbounded=True, **opts).check_bounds()  # a warning, no error
    assert says in caplog.text


def test_an_engine_without_cgroup_limits_needs_its_own_uid_ranges(tmp_path):
    b = _backend(tmp_path)
    b.no_cgroups = "the engine reports no MemoryLimit support (docker info)"
    with pytest.raises(ConfigError, match=r"processes and memory \(the engine reports no MemoryLimit"):
        b.check_bounds()
    b.userns = "auto"  # (rootless Podman on cgroup v1: nproc and as rlimits in a uid range of its own)
    b.check_bounds()


class _DeadRunnersEngine(_StuckEngine):
    """The stuck engine, listing one container of a runner that died (its pid no longer runs)."""

    def __init__(self, failures: int):
        super().__init__(failures)
        dead = subprocess.Popen(["true"])
        dead.wait()
        labels = {**docker_orphans.runner_labels("gone", "/nowhere"), docker_orphans.KEEP: "0"}
        labels[docker_orphans.RUNNER_PID] = str(dead.pid)
        self.listed = [{"Id": CID, "Labels": labels}]

    def containers(self, all, filters):
        return self.listed


def test_a_later_runner_kills_the_processes_of_a_dead_runners_container_it_cannot_remove(engine_process):
    _, pids = engine_process
    assert docker_orphans.reap(_DeadRunnersEngine(failures=2)) == 0  # not removed, said in the log, no exception
    assert not any(_alive(p) for p in _pids(pids))
    assert docker_orphans.reap(_DeadRunnersEngine(failures=0)) == 1


@pytest.mark.parametrize("shell", ["/bin/sh", "/bin/bash", "busybox sh"])
def test_the_command_limits_hold_in_each_shell(shell):
    """The limits prefix of a container without cgroups (docker_exec.set_limits) in dash, bash and busybox's ash: set
    hard, so the command cannot raise them."""
    argv = shell.split()
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed")
    docker_exec.set_limits("c1", 77, 512 << 20)
    try:
        script = docker_exec.limited(
            "c1", "ulimit -H -d; ulimit -u 2>/dev/null || ulimit -p; ulimit -d 1048576 && echo raised"
        )
    finally:
        docker_exec.forget("c1")
    assert docker_exec.limited("c1", "true") == "true"  # (forgotten: no prefix)
    out = subprocess.run([*argv, "-c", script], capture_output=True, text=True, timeout=30)
    assert out.stdout.split()[:2] == ["524288", "77"], (out.stdout, out.stderr)
    if not _has_sys_resource():  # (with CAP_SYS_RESOURCE a hard limit can be raised: the runner drops it)
        assert "raised" not in out.stdout, out.stdout


def _has_sys_resource() -> bool:
    with open("/proc/self/status") as fp:
        caps = next(int(line.split()[1], 16) for line in fp if line.startswith("CapEff:"))
    return bool(caps & (1 << 24))
