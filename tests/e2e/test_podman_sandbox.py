"""The Podman sandbox on real Podman services, rootful and rootless: the Docker backend's checks.

Needs the two services of scripts/ci_podman_setup.sh (run by `make test` as root): rootful on
/run/podman/podman.sock, rootless as the user hermes-podman on its own socket, each with the test
images in its own store. Without them the tests fail with how to set them up, unless
HERMES_SKIP_PODMAN=1, where they skip. Every test runs against both services (`[rootful]`, `[rootless]`).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import pwd
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from hermes_runner.config import DockerSandboxOptions, PodmanSandboxOptions, SandboxConfig
from hermes_runner.errors import ConfigError
from hermes_runner.sandbox.docker import orphans as docker_orphans
from hermes_runner.sandbox.podman import PodmanBackend, find_url

import tests.e2e.test_docker_sandbox as docker_tests
from tests.e2e.test_sandbox_escapes import ALLOWED_ENV, BIG, env_keys
from tests.helpers import system
from tests.helpers.containers import (
    FLOOD,
    FORK_BOMB,
    check_timed_out_tree,
    flood,
    record,
    timed_out_tree,
    two_prompts,
    uid_processes,
)
from tests.helpers.machine import require
from tests.helpers.run import ROOT, LiveRunner, base_overrides, read_jsonl, run_inprocess, script, write_jsonl
from tests.helpers.tiny_agent import TINY
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.podman

BASE = docker_tests.BASE  # local/busybox:ci
IMG_A, IMG_B = docker_tests.IMG_A, docker_tests.IMG_B  # built below, in each service's own store
DONE, call, sh, tool_results = docker_tests.DONE, docker_tests.call, docker_tests.sh, docker_tests.tool_results


@dataclass
class Engine:
    mode: str  # rootful | rootless
    url: str
    client: object  # docker.DockerClient on the service
    rootless: bool
    limits: bool  # whether memory/pids limits are enforced (not by rootless Podman on cgroup v1)


@pytest.fixture(scope="session", params=["rootful", "rootless"])
def podman(request):
    """A Podman service (rootful, then rootless) with the test images; fails without it (HERMES_SKIP_PODMAN=1: skips)."""
    import docker

    require("podman")
    url = f"unix://{system.podman_sockets()[request.param]}"
    client = docker.DockerClient(base_url=url, timeout=120)
    for tag, dockerfile in docker_tests.DOCKERFILES.items():  # Podman builds them itself, from its own store
        client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True,
                            network_mode="none")  # fmt: skip
    info = client.api.get(f"{client.api.base_url}/v4.0.0/libpod/info").json()["host"]
    rootless = info["security"]["rootless"]
    assert rootless == (request.param == "rootless"), info["security"]
    yield Engine(request.param, url, client, rootless, limits=not (rootless and info["cgroupVersion"] == "v1"))
    client.close()


def containers_of(podman: Engine, run_dir: Path) -> list:
    return docker_tests.containers_of(podman.client, run_dir)


def podman_cfg(make_cfg, podman: Engine, *extra: str, dataset: Path):
    return make_cfg(
        "sandbox=podman", f"sandbox.podman.url={podman.url}", f"sandbox.image={BASE}", "distribution=terminal_only",
        "sandbox.docker.pool_size=0", *extra, dataset=dataset,
    )  # fmt: skip


def in_container(podman: Engine, commands: list[str], tmp_path: Path, opts=None, image=BASE, tools=()):
    """Run commands in one prompt's container (and tools in it, "a", or in a second prompt's, "b")."""
    cfg = SandboxConfig(backend="podman", image=image, docker=opts or DockerSandboxOptions(pool_size=0),
                        podman=PodmanSandboxOptions(url=podman.url))  # fmt: skip
    return asyncio.run(two_prompts(PodmanBackend(cfg, "iso", str(tmp_path / "iso")), image, commands, tools))


# -- per-row image and working dir, tools end to end ----------------------------------------


def test_per_row_image_and_cwd(podman, make_cfg, server, tmp_path, run_dir):
    probe = "cat /etc/which-image 2>/dev/null || echo base; pwd; id -u; ls; echo edit > mine.txt && echo wrote"
    rows = [
        {"prompt": script(sh(probe), DONE, text="rowA"), "image": IMG_A, "cwd": "/srv/project"},
        {"prompt": script(sh(probe), DONE, text="rowB"), "docker_image": IMG_B},
        {"prompt": script(sh(probe), DONE, text="rowC"), "cwd": "/work/here"},
        {"prompt": script(sh("cat /etc/debian_version >/dev/null && id -un"), DONE, text="rowD"),
         "image": "local/bookworm:ci"},
    ]  # fmt: skip
    cfg = podman_cfg(make_cfg, podman, "num_workers=2", dataset=write_jsonl(tmp_path / "d.jsonl", rows))
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 4
    a, b, c, d = (tool_results(server, t)[0]["output"].split("\n") for t in ("rowA", "rowB", "rowC", "rowD"))
    assert a[:5] == ["a", "/srv/project", "0", "README", "wrote"]  # the image's filled repo dir, in a fresh volume
    assert b[:4] == ["b", "/workspace", "1000", "wrote"]  # the image's regular user, a tmpfs it owns
    assert c[:4] == ["base", "/work/here", "1000", "wrote"]  # sandbox.image; a cwd the image lacks
    assert d[0] == "sandbox"  # the Debian image, as its regular user
    assert containers_of(podman, run_dir) == []
    assert not Path("/srv/project/mine.txt").exists() and not Path("/work/here").exists()


def test_file_tools_run_inside_the_container(podman, make_cfg, server, tmp_path, run_dir):
    steps = [
        call("write_file", path="notes/a.txt", content="hello\nworld\n"),
        call("patch", mode="replace", path="notes/a.txt", old_string="world", new_string="podman"),
        call("read_file", path="/workspace/notes/a.txt"),
        call("write_file", path="/etc/evil", content="x"),
        DONE,
    ]
    rows = [{"prompt": script(*steps, text="files")}]
    code, _ = run_inprocess(podman_cfg(make_cfg, podman, dataset=write_jsonl(tmp_path / "d.jsonl", rows)), run_dir)
    assert code == 0
    write, patch, read, evil = tool_results(server, "files")
    assert write["bytes_written"] == 12 and "+podman" in patch["diff"]
    assert read["content"] == "1|hello\n2|podman"
    assert "Read-only file system" in evil["error"]


# -- isolation ------------------------------------------------------------------------------


def test_network_is_off_by_default(podman, tmp_path):
    http = ThreadingHTTPServer(("127.0.0.1", 0), docker_tests._Pong)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:
        fetch = f'printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 3 127.0.0.1 {http.server_address[1]} 2>&1 | tail -n 1'
        # Control: in the host's network the listener answers (so the check below can fail).
        (links_host, pong), _ = in_container(
            podman, ["ls /sys/class/net", fetch], tmp_path, DockerSandboxOptions(pool_size=0, network_mode="host")
        )
        assert pong.output.strip() == "pong" and links_host.output.split() != ["lo"], (pong, links_host)
        (links, blocked), _ = in_container(podman, ["ls /sys/class/net", fetch], tmp_path)
        assert links.output.split() == ["lo"]
        assert "pong" not in blocked.output
    finally:
        http.shutdown()


def test_hardening_defaults_and_host_env(podman, tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_FAKE_SECRET", "sk-live-should-never-leak")
    commands = [
        "env",
        "touch /etc/x",
        "touch /tmp/x && chown 1000 /tmp/x",
        "grep NoNewPrivs /proc/self/status",
        "cat /proc/1/comm",
        "grep CapEff /proc/self/status",
        "mount -o remount,rw / && echo REMOUNTED",
        "ls /var/run/docker.sock /run/docker.sock /run/podman/podman.sock 2>&1",
    ]
    results, _ = in_container(podman, commands, tmp_path, DockerSandboxOptions(pool_size=0, user="0:0"))
    env, ro, chown, nnp, init, caps, remount, socks = (r.output for r in results)
    assert "sk-live-should-never-leak" not in env and "HERMES_FAKE_SECRET" not in env
    # Podman adds container=podman (systemd's convention), nothing from the runner
    assert env_keys(env) <= {"HOME", "TERM", "PATH", "HOSTNAME", "PWD", "SHLVL", "OLDPWD", "_", "container"}
    assert "Read-only file system" in ro
    assert "Operation not permitted" in chown  # root without capabilities
    assert nnp.split() == ["NoNewPrivs:", "1"]
    assert init.strip() == "podman-init"  # catatonit as PID 1
    assert caps.split() == ["CapEff:", "0000000000000000"]
    assert "REMOUNTED" not in remount
    assert socks.count("No such file") == 3


def test_secrets_and_other_prompts_files_are_unreachable(podman, tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_CANARY_KEY", "sk-podman-canary")
    commands = [
        "ln -s /proc/self/environ env.txt; ln -s /proc/1/environ init.txt; cat /proc/1/environ | tr '\\0' '\\n'",
        "echo secret-of-a > mine.txt",
        f"x='{'q' * BIG}'; echo ${{#x}}",
    ]
    tools = [
        ("a", "read_file", {"path": "env.txt"}),
        ("a", "read_file", {"path": "init.txt"}),
        ("b", "read_file", {"path": "/workspace/mine.txt"}),
        ("b", "terminal", {"command": "cat /workspace/mine.txt; ls /workspace"}),
    ]
    (environ, _, big), results = in_container(podman, commands, tmp_path, tools=tools)
    assert "sk-podman-canary" not in environ.output and env_keys(environ.output) <= ALLOWED_ENV | {"container"}
    assert big.exit_code == 0 and big.output.strip() == str(BIG), big.output[:200]  # a huge command, on stdin
    (env_a, ok1), (init_a, _), (_, ok3), (other_term, _) = results
    assert "sk-podman-canary" not in json.dumps(env_a) and "sk-podman-canary" not in json.dumps(init_a)
    assert (not ok1 and "binary" in env_a["error"]) or env_keys(env_a["content"]) <= ALLOWED_ENV | {"container"}
    assert not ok3 and "secret-of-a" not in other_term["output"]


def test_default_image_runs_as_non_root_and_cannot_read_shadow(podman, tmp_path):
    (who, shadow), results = in_container(
        podman, ["id -u", "cat /etc/shadow"], tmp_path, image="local/bookworm:ci",
        tools=[("a", "read_file", {"path": "/etc/shadow"})],
    )  # fmt: skip
    assert who.output.strip() == "1000", who.output
    assert shadow.exit_code != 0 and "root:" not in shadow.output
    assert not results[0][1] and "Permission denied" in results[0][0]["error"]


def test_limits_are_enforced(podman, tmp_path):
    """Rootful: cgroup memory and pids limits. Rootless on cgroup v1 (no cgroups): RLIMIT_NPROC and RLIMIT_DATA in a
    uid range of the container's own (--userns=auto)."""
    opts = DockerSandboxOptions(pool_size=0, mem_limit="64m", pids_limit=20)
    fork = "for i in $(seq 40); do sleep 30 >/dev/null 2>&1 & done 2>&1 | tail -n 1"
    hog = "awk 'BEGIN { s = \"x\"; while (1) s = s s }'; echo rc=$?"
    if not podman.limits:
        (limits, uids, mem, forks), _ = in_container(
            podman, ["ulimit -u; ulimit -d", "cat /proc/self/uid_map", hog, fork], tmp_path, opts
        )
        assert limits.output.split() == ["20", str(64 * 1024)], limits
        inside, host, size = uids.output.split()
        assert inside == "0" and int(host) > 0 and int(size) >= 1024, uids  # a range of its own, not the user's
        assert "rc=0" not in mem.output, mem  # awk runs out of data
        assert "can't fork" in forks.output or "Resource temporarily unavailable" in forks.output, forks
        return
    (limit, mem, forks), _ = in_container(podman, [
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max",
        hog,
        fork,
    ], tmp_path, opts)  # fmt: skip
    assert limit.output.split() == ["67108864", "20"], limit
    assert "rc=137" in mem.output, mem  # OOM-killed at 64 MiB
    assert "can't fork" in forks.output or "Resource temporarily unavailable" in forks.output, forks


@pytest.mark.parametrize("command", [FORK_BOMB, FLOOD], ids=["fork-bomb", "flood-2000"])
def test_a_process_flood_stays_bounded_and_ends_with_its_prompt(podman, tmp_path, command):
    """As on Docker (test_docker_sandbox); rootless, the container's processes run as a uid range of their own, of
    which no process is left once the prompt ended."""
    limit = docker_tests.FLOOD_LIMIT
    opts = DockerSandboxOptions(pool_size=0, pids_limit=limit)
    cfg = SandboxConfig(backend="podman", image=BASE, docker=opts, podman=PodmanSandboxOptions(url=podman.url),
                        command_timeout_s=5)  # fmt: skip
    backend = PodmanBackend(cfg, "flood", str(tmp_path / "flood"))
    # rootless, the limit is RLIMIT_NPROC of the container's uid: the service user's runc (one per exec, until it
    # becomes the exec's process) is in the container's pid namespace but not under it
    service_uid = pwd.getpwnam(system.PODMAN_USER).pw_uid if podman.rootless else None
    ignore = frozenset({service_uid}) if service_uid is not None else frozenset()
    f = asyncio.run(flood(backend, BASE, command, timeout=5, runaway=4 * limit, ignore_uids=ignore))
    record(f"podman-{podman.mode}", command, f)
    assert not f.runaway and f.container_max <= limit, f
    assert f.host_max - f.baseline <= limit + docker_tests.HOST_NOISE, f
    assert f.left == set() and f.after <= f.baseline + docker_tests.HOST_NOISE, f  # nothing left: the host is back
    if service_uid is not None:
        # the command's processes: a uid of the container's own range, not the service user's (whose podman, conmon
        # and runc, seen here as they start an exec, keep working whatever the command does)
        own = f.uids - {service_uid}
        start, count = next(
            ln.split(":")[1:]
            for ln in Path("/etc/subuid").read_text().split()
            if ln.startswith(f"{system.PODMAN_USER}:")
        )
        assert own and all(int(start) <= uid < int(start) + int(count) for uid in own), f
        assert uid_processes(own) == []


def test_no_writable_path_reaches_the_hosts_disk(podman, tmp_path):
    """Every writable path is a tmpfs of a capped size: the working dir (a copy of the image's), the image's VOLUME,
    and the tmpfs Podman adds to a read-only container (/run, /var/tmp)."""
    probe = (
        "awk '$2 !~ \"^/(proc|sys|dev)\" && $4 ~ /^rw/ {print $2, $3}' /proc/mounts | sort; "
        "cat README; dd if=/dev/zero of=big bs=1M count=200 2>&1; dd if=/dev/zero of=/var/tmp/big bs=1M count=100 2>&1"
    )
    opts = DockerSandboxOptions(pool_size=0, workdir_tmpfs="rw,exec,nosuid,nodev,size=64m")
    cfg = SandboxConfig(backend="podman", image=docker_tests.IMG_V, docker=opts, workdir="/srv/project",
                        podman=PodmanSandboxOptions(url=podman.url))  # fmt: skip
    (out,), _ = asyncio.run(two_prompts(PodmanBackend(cfg, "d", str(tmp_path / "d")), docker_tests.IMG_V, [probe]))
    lines = out.output.splitlines()
    mounts = {ln.split()[0] for ln in lines if ln.startswith("/") and len(ln.split()) == 2}
    rw = {ln.split()[0]: ln.split()[1] for ln in lines if ln.startswith("/") and len(ln.split()) == 2}
    assert set(rw.values()) == {"tmpfs"}, out.output
    assert {"/srv/project", "/tmp", "/var/cache/app"} <= mounts, out.output
    assert "project A" in lines  # the image's content, copied into the tmpfs
    assert out.output.count("No space left on device") == 2, out.output  # 200 MB into 64 MB, 100 MB into 64 MB


def test_timeout_kills_the_command_tree(podman, tmp_path):
    cfg = SandboxConfig(backend="podman", image=BASE, podman=PodmanSandboxOptions(url=podman.url))
    check_timed_out_tree(*asyncio.run(timed_out_tree(PodmanBackend(cfg, "to", str(tmp_path / "to")), BASE)))


# -- images and the engine ------------------------------------------------------------------


def test_missing_image_fails_only_its_prompts_before_any_token(podman, make_cfg, server, tmp_path, run_dir):
    rows = [
        {"prompt": script(sh("echo ok"), DONE, text="good1")},
        {"prompt": script(sh("echo ok"), DONE, text="lost"), "image": "hermes-test/missing:nope"},
    ]
    code, stats = run_inprocess(podman_cfg(make_cfg, podman, dataset=write_jsonl(tmp_path / "d.jsonl", rows)), run_dir)
    assert code == 1
    assert stats["prompts"]["ok"] == 1 and stats["failed_by_error"] == {"ImageUnavailable": 1}
    (failure,) = read_jsonl(run_dir / "failures.jsonl")
    assert "hermes-test/missing:nope" in failure["error"] and "not present locally" in failure["error"]
    assert server.calls_for("lost") == []  # no token spent on it
    assert containers_of(podman, run_dir) == []


def test_service_unreachable_is_a_clear_error(make_cfg, tmp_path, run_dir, caplog):
    rows = [{"prompt": "p"}]
    sock = tmp_path / "no-such.sock"
    cfg = make_cfg(
        "sandbox=podman", f"sandbox.podman.url=unix://{sock}", dataset=write_jsonl(tmp_path / "d.jsonl", rows)
    )
    code, _ = run_inprocess(cfg, run_dir)
    assert code == 2
    assert f"no Podman service answers at unix://{sock}" in caplog.text


def test_socket_discovery(tmp_path):
    import socket

    sock_path = tmp_path / "podman" / "podman.sock"
    sock_path.parent.mkdir()
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock_path))
    try:
        assert find_url("tcp://h:1", {"CONTAINER_HOST": "unix:///x"}) == "tcp://h:1"  # the setting first
        assert find_url(None, {"CONTAINER_HOST": "unix:///x", "XDG_RUNTIME_DIR": str(tmp_path)}) == "unix:///x"
        assert find_url(None, {"XDG_RUNTIME_DIR": str(tmp_path)}) == f"unix://{sock_path}"  # the user's service
        with pytest.raises(ConfigError, match="must be unix:///path or tcp://host:port"):
            find_url("/run/podman/podman.sock", {})
        if not Path("/run/podman/podman.sock").is_socket():
            with pytest.raises(ConfigError, match="no Podman socket was found"):
                find_url(None, {"XDG_RUNTIME_DIR": str(tmp_path / "none")})
        else:
            assert find_url(None, {"XDG_RUNTIME_DIR": str(tmp_path / "none")}) == "unix:///run/podman/podman.sock"
    finally:
        s.close()


# -- cleanup --------------------------------------------------------------------------------


def _cli(server, podman: Engine, tmp_path: Path, run_dir: Path, dataset: Path) -> list[str]:
    args = base_overrides(server, tmp_path) + [
        "run_name=kill", f"hydra.run.dir={run_dir}", f"dataset_file={dataset}", "sandbox=podman",
        f"sandbox.podman.url={podman.url}", f"sandbox.image={BASE}", "distribution=terminal_only", "num_workers=2",
    ]  # fmt: skip
    return [sys.executable, str(ROOT / "run.py"), *args]


def test_killed_runner_leaves_no_container_and_the_resume_completes(podman, server, tmp_path, run_dir):
    """kill -9 of the runner: its watchdog removes its containers from Podman; the rerun finishes the rest."""
    rows = [{"prompt": script(sh("echo started; sleep 60", timeout=90), DONE, text=f"k{i}")} for i in range(3)]
    dataset = write_jsonl(tmp_path / "d.jsonl", rows)
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}

    def sessions() -> tuple[int, int]:
        return len(server.requests), len(containers_of(podman, run_dir))

    with LiveRunner(_cli(server, podman, tmp_path, run_dir, dataset), env) as runner:
        runner.wait_for(lambda: min(sessions()) >= 2, 90, "two sessions", lambda: f"requests, containers: {sessions()}")
        time.sleep(0.5)
        code, out = runner.end(signal.SIGKILL)
    assert code == -signal.SIGKILL, out
    wait_for(lambda: containers_of(podman, run_dir) == [], 60, "the watchdog to remove the orphans", interval=0.2)
    server.handler = lambda body, srv: srv.completion(body, DONE)
    res = subprocess.run(_cli(server, podman, tmp_path, run_dir, dataset), cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=180)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert containers_of(podman, run_dir) == []
    assert len(read_jsonl(run_dir / "trajectories.jsonl")) == 3


def test_an_external_agent_runs_in_a_podman_container_through_the_proxy(podman, make_cfg, server, tmp_path, run_dir):
    """agent=external on Podman (Docker's code path, the service's own user when rootless): the program is bound
    into the prompt's container (network none), reaches the model only through the proxy's socket, and verify
    scores what it left there."""
    steps = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi > out.txt; cat out.txt"}}]},
        {"content": "All done."},
    ]
    rows = [{"prompt": script(*steps, text="in podman"), "url": server.url + "/models",
             "verify": "grep -qx hi out.txt && grep -q DIRECT-BLOCKED direct.txt"}]  # fmt: skip
    command = "agent.command='tiny-agent --direct {{ row.url | quote }} {{ prompt | quote }}'"
    cfg = make_cfg(*TINY, command, "sandbox=podman", f"sandbox.podman.url={podman.url}", "sandbox.image=local/bookworm:ci",
                   "sandbox.docker.pool_size=0", "+scorer@scorers.verify=verify",
                   dataset=write_jsonl(tmp_path / "d.jsonl", rows))  # fmt: skip
    code, _ = run_inprocess(cfg, run_dir)
    assert code == 0, (run_dir / "failures.jsonl").read_text()
    [e] = read_jsonl(run_dir / "trajectories.jsonl")
    assert [t["from"] for t in e["conversations"]] == ["system", "human", "gpt", "tool", "gpt"]
    assert e["tool_stats"] == {"bash": {"count": 1, "success": 1, "failure": 0}}
    assert e["completed"] and e["reward"] == 1.0, e["scores"]
    assert len(server.calls_for("in podman")) == 2 and containers_of(podman, run_dir) == []


def test_any_runner_reaps_containers_of_dead_runners(podman, tmp_path):
    """A container of a dead runner (its watchdog gone too) is removed when any runner starts on that service."""
    import docker

    dead = subprocess.Popen(["true"])
    dead.wait()
    labels = {**docker_orphans.runner_labels("gone", str(tmp_path / "elsewhere")), docker_orphans.KEEP: "0"}
    labels[docker_orphans.RUNNER_PID] = str(dead.pid)
    c = podman.client.containers.run(BASE, ["sleep", "300"], detach=True, labels=labels, network_mode="none")
    try:

        async def go():
            cfg = SandboxConfig(backend="podman", image=BASE, podman=PodmanSandboxOptions(url=podman.url))
            backend = PodmanBackend(cfg, "any", str(tmp_path / "other"))
            await backend.start({BASE})
            await backend.shutdown()

        asyncio.run(go())
        with pytest.raises(docker.errors.NotFound):
            podman.client.containers.get(c.id)
    finally:
        try:
            c.remove(force=True)
        except docker.errors.NotFound:
            pass
