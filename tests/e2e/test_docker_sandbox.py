"""The Docker sandbox on a real engine: per-row images, isolation, cleanup in every ending.

Needs dockerd and local/busybox:ci (scripts/ci_docker_setup.sh, run by `make test` as root). Without
them the tests fail with how to install them, unless HERMES_SKIP_DOCKER=1, where they skip.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hermes_runner.config import DockerSandboxOptions, SandboxConfig
from hermes_runner.dataset import Prompt
from hermes_runner.errors import ConfigError
from hermes_runner.sandbox.docker import orphans as docker_orphans
from hermes_runner.sandbox.docker import procs as docker_procs
from hermes_runner.sandbox.docker.backend import DockerBackend

from tests.helpers.containers import FLOOD, FORK_BOMB, check_timed_out_tree, flood, record, timed_out_tree
from tests.helpers.machine import require
from tests.helpers.run import ROOT, LiveRunner, base_overrides, read_jsonl, run_inprocess, script, write_jsonl
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.docker

BASE = "local/busybox:ci"
IMG_A = "hermes-test/project:a"  # /srv/project filled, owned by root
IMG_B = "hermes-test/project:b"  # nothing at the working dir; has the regular user `sandbox` (uid 1000)
IMG_V = "hermes-test/project:v"  # IMG_A with a VOLUME
DOCKERFILES = {
    IMG_A: f"FROM {BASE}\nRUN mkdir -p /srv/project && echo 'project A' > /srv/project/README && echo a > /etc/which-image\n",
    IMG_B: f"FROM {BASE}\nRUN echo b > /etc/which-image\n",
    IMG_V: f"FROM {IMG_A}\nRUN mkdir -p /var/cache/app\nVOLUME /var/cache/app\n",
}


@pytest.fixture(scope="session")
def engine():
    """A docker client with the test images built; fails without an engine (HERMES_SKIP_DOCKER=1: skips)."""
    import docker

    require("docker")
    try:
        client = docker.from_env(timeout=60)
        client.ping()
        client.images.get(BASE)
    except Exception as exc:  # noqa: BLE001 - DockerException, ConnectionError, ImageNotFound
        pytest.fail(f"no usable Docker engine ({exc}); run scripts/ci_docker_setup.sh", pytrace=False)
    for tag, dockerfile in DOCKERFILES.items():
        client.images.build(
            fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True, network_mode="none"
        )
    yield client
    client.close()


def containers_of(client, run_dir: Path) -> list:
    label = f"{docker_orphans.RUN_DIR}={Path(run_dir).resolve()}"
    return client.api.containers(all=True, filters={"label": label})


def docker_cfg(make_cfg, *extra: str, dataset: Path):
    return make_cfg(
        "sandbox=docker", f"sandbox.image={BASE}", "distribution=terminal_only", "sandbox.docker.pool_size=0",
        *extra, dataset=dataset,
    )  # fmt: skip


def tool_results(server, text: str) -> list[dict]:
    """Results of the tool calls made for the prompt containing `text`, in order."""
    last = max(server.calls_for(text), key=lambda r: r.turn)
    return [json.loads(m["content"]) for m in last.body["messages"] if m.get("role") == "tool"]


def call(name: str, **arguments) -> dict:
    return {"reasoning": f"use {name}", "tool_calls": [{"name": name, "arguments": arguments}]}


def sh(command: str, **extra) -> dict:
    return call("terminal", command=command, **extra)


DONE = {"reasoning": "done", "content": "Done."}


# -- per-row image and working dir, tools end to end ----------------------------------------


def test_per_row_image_and_cwd(engine, make_cfg, server, tmp_path, run_dir):
    probe = "cat /etc/which-image 2>/dev/null || echo base; pwd; id -u; ls; echo edit > mine.txt && echo wrote"
    rows = [
        {"prompt": script(sh(probe), DONE, text="rowA"), "image": IMG_A, "cwd": "/srv/project"},
        {"prompt": script(sh(probe), DONE, text="rowB"), "docker_image": IMG_B},
        {"prompt": script(sh(probe), DONE, text="rowC"), "cwd": "/work/here"},
    ]
    code, stats = run_inprocess(docker_cfg(make_cfg, dataset=write_jsonl(tmp_path / "d.jsonl", rows)), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 3
    a, b, c = (tool_results(server, t)[0]["output"].split("\n") for t in ("rowA", "rowB", "rowC"))
    # A: its own image, its repo dir with the image's content, root because root owns that repo, writable
    assert a[:5] == ["a", "/srv/project", "0", "README", "wrote"]
    # B: the other image, default working dir, the image's regular user, writable
    assert b[:4] == ["b", "/workspace", "1000", "wrote"]
    # C: no image in the row -> sandbox.image; a cwd absent from the image is created and writable
    assert c[:4] == ["base", "/work/here", "1000", "wrote"]
    assert containers_of(engine, run_dir) == []
    assert not Path("/srv/project/mine.txt").exists() and not Path("/work/here").exists()


def test_terminal_and_file_tools_run_inside_the_container(engine, make_cfg, server, tmp_path, run_dir):
    steps = [
        call("write_file", path="notes/a.txt", content="hello\nworld\n"),
        call("patch", mode="replace", path="notes/a.txt", old_string="world", new_string="docker"),
        call("read_file", path="/workspace/notes/a.txt"),
        call("search_files", pattern="dock", path="notes"),
        sh("cat notes/a.txt; hostname", workdir="/workspace"),
        call("read_file", path="/etc/shadow-none"),
        call("write_file", path="/etc/evil", content="x"),
        DONE,
    ]
    rows = [{"prompt": script(*steps, text="files")}]
    code, stats = run_inprocess(docker_cfg(make_cfg, dataset=write_jsonl(tmp_path / "d.jsonl", rows)), run_dir)
    assert code == 0
    write, patch, read, search, term, missing, evil = tool_results(server, "files")
    assert write["bytes_written"] == 12 and "+docker" in patch["diff"]
    assert read["content"] == "1|hello\n2|docker"
    assert search["matches"] == ["notes/a.txt:2:docker"]
    assert term["output"].startswith("hello\ndocker\n") and term["exit_code"] == 0
    assert "file not found" in missing["error"]
    assert "Read-only file system" in evil["error"]  # the root filesystem is read-only
    assert not Path("/workspace/notes").exists()


def test_no_state_survives_between_prompts(engine, make_cfg, server, tmp_path, run_dir):
    """Pre-started containers (pool) still serve one prompt each."""
    cmd = "test -e /tmp/marker && echo LEAK; touch /tmp/marker; echo id=$(hostname)"
    rows = [{"prompt": script(sh(cmd), DONE, text=f"state{i}")} for i in range(6)]
    cfg = docker_cfg(
        make_cfg, "sandbox.docker.pool_size=2", "num_workers=2", dataset=write_jsonl(tmp_path / "d.jsonl", rows)
    )
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 0
    outs = [tool_results(server, f"state{i}")[0]["output"] for i in range(6)]
    assert not any("LEAK" in o for o in outs)
    assert len({o.strip() for o in outs}) == 6  # six distinct containers
    assert containers_of(engine, run_dir) == []


# -- isolation ------------------------------------------------------------------------------


class _Pong(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"pong")

    def log_message(self, *args):
        pass


async def _in_container(opts: DockerSandboxOptions, commands: list[str], tmp_path: Path, image: str = BASE):
    backend = DockerBackend(SandboxConfig(backend="docker", image=image, docker=opts), "iso", str(tmp_path / "iso"))
    return await _one(backend, image, commands)


async def _one(backend: DockerBackend, image: str, commands: list[str]):
    assert await backend.start({image}) == {}
    sandbox = await backend.create(Prompt(0, "k", "p"))
    try:
        return [await sandbox.run(c, 20) for c in commands]
    finally:
        await sandbox.close()
        await backend.shutdown()


def test_network_is_off_by_default(engine, tmp_path):
    http = ThreadingHTTPServer(("0.0.0.0", 0), _Pong)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:
        port = http.server_address[1]
        fetch = f'printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 3 {{gw}} {port} | tail -n 1'
        # Control: with the bridge network the host's listener answers (so the check below can fail).
        gw_cmd = "ip route | awk '/default/ {print $3}'"
        gw, pong = _run(
            _in_container(
                DockerSandboxOptions(network_mode="bridge"), [gw_cmd, fetch.format(gw=f"$({gw_cmd})")], tmp_path
            )
        )
        assert pong.output.strip() == "pong", pong
        links, blocked = _run(
            _in_container(DockerSandboxOptions(), ["ls /sys/class/net", fetch.format(gw=gw.output.strip())], tmp_path)
        )
        assert links.output.split() == ["lo"]
        assert "pong" not in blocked.output and "unreachable" in blocked.output.lower()
    finally:
        http.shutdown()


def test_limits_are_enforced(engine, tmp_path):
    opts = DockerSandboxOptions(mem_limit="64m", pids_limit=20)
    limit, mem, fork = _run(_in_container(opts, [
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max",
        "awk 'BEGIN { s = \"x\"; while (1) s = s s }'",  # doubles a string until something stops it
        "for i in $(seq 40); do sleep 30 >/dev/null 2>&1 & done 2>&1 | tail -n 1",  # last command: no pid left after
    ], tmp_path))  # fmt: skip
    assert mem.exit_code == 137, mem  # OOM-killed at 64 MiB
    assert "can't fork" in fork.output or "Resource temporarily unavailable" in fork.output, fork
    assert limit.output.split() == ["67108864", "20"], limit


def test_hardening_defaults_and_host_env(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_FAKE_SECRET", "sk-live-should-never-leak")
    results = _run(_in_container(DockerSandboxOptions(user="0:0"), [
        "env",
        "touch /etc/x",
        "touch /tmp/x && chown 1000 /tmp/x",
        "grep NoNewPrivs /proc/self/status",
        "cat /proc/1/comm",
        "grep CapEff /proc/self/status",
    ], tmp_path))  # fmt: skip
    env, ro, chown, nnp, init, caps = (r.output for r in results)
    assert "sk-live-should-never-leak" not in env and "HERMES_FAKE_SECRET" not in env
    assert set(line.split("=")[0] for line in env.split()) <= {
        "HOME",
        "TERM",
        "PATH",
        "HOSTNAME",
        "PWD",
        "SHLVL",
        "OLDPWD",
        "_",
    }
    assert "Read-only file system" in ro
    assert "Operation not permitted" in chown  # root without capabilities
    assert nnp.split() == ["NoNewPrivs:", "1"]
    assert init.strip() == "docker-init"
    assert caps.split() == ["CapEff:", "0000000000000000"]


def test_relaxed_settings(engine, tmp_path):
    opts = DockerSandboxOptions(read_only=False, user=None, cap_drop=[], env={"GREETING": "hi"}, allow_unbounded=True)
    touch, who, env = _run(_in_container(opts, ["touch /etc/x && echo ok", "id -u", "echo $GREETING"], tmp_path))
    assert touch.output.strip() == "ok" and who.output.strip() == "0" and env.output.strip() == "hi"


FLOOD_LIMIT = 64  # sandbox.docker.pids_limit of the flood tests
HOST_NOISE = 300  # other processes the host may start meanwhile (other tests of a shared machine)


@pytest.mark.parametrize("command", [FORK_BOMB, FLOOD], ids=["fork-bomb", "flood-2000"])
def test_a_process_flood_stays_bounded_and_ends_with_its_prompt(engine, tmp_path, command):
    """The container's processes never pass pids_limit (sampled from the host every 0.2 s; past 4x the limit the
    test kills them itself), the host's count stays near its own, and nothing is left once the prompt ended."""
    opts = DockerSandboxOptions(pool_size=0, pids_limit=FLOOD_LIMIT)
    cfg = SandboxConfig(backend="docker", image=BASE, docker=opts, command_timeout_s=5)
    f = _run(
        flood(DockerBackend(cfg, "flood", str(tmp_path / "flood")), BASE, command, timeout=5, runaway=4 * FLOOD_LIMIT)
    )
    record("docker", command, f)
    assert not f.runaway and f.container_max <= FLOOD_LIMIT, f
    assert f.host_max - f.baseline <= FLOOD_LIMIT + HOST_NOISE, f
    assert f.left == set() and f.after <= f.baseline + HOST_NOISE, f  # nothing left: the host is back


def test_unbounded_options_refuse_to_start_unless_allowed(engine, tmp_path):
    opts = DockerSandboxOptions(pool_size=0, mem_limit=None, volumes=[f"{tmp_path}:/state"])
    backend = DockerBackend(SandboxConfig(backend="docker", image=BASE, docker=opts), "ub", str(tmp_path / "ub"))
    with pytest.raises(ConfigError, match=r"cannot bound each prompt's memory .*writable.*allow_unbounded=true"):
        _run(backend.start({BASE}))
    _run(backend.shutdown())
    (out,) = _run(_in_container(DockerSandboxOptions(mem_limit=None, allow_unbounded=True), ["echo ran"], tmp_path))
    assert out.output.strip() == "ran"


def test_no_writable_path_reaches_the_hosts_disk(engine, tmp_path):
    """Every writable path of a prompt is a tmpfs of a capped size (the image's filled working dir and its VOLUMEs
    too, with their content)."""
    probe = (
        "awk '$2 !~ \"^/(proc|sys|dev)\" && $4 ~ /^rw/ {print $2, $3}' /proc/mounts | sort; "
        "cat README; dd if=/dev/zero of=big bs=1M count=200 2>&1"
    )
    opts = DockerSandboxOptions(workdir_tmpfs="rw,exec,nosuid,nodev,size=64m")
    backend = DockerBackend(
        SandboxConfig(backend="docker", image=IMG_V, docker=opts, workdir="/srv/project"), "d", str(tmp_path / "d")
    )
    (out,) = _run(_one(backend, IMG_V, [probe]))
    lines = out.output.splitlines()
    mounts = dict(line.split() for line in lines if line.startswith("/") and len(line.split()) == 2)
    assert mounts == {"/srv/project": "tmpfs", "/tmp": "tmpfs", "/var/cache/app": "tmpfs"}, out.output
    assert "project A" in lines  # the image's content, copied into the tmpfs
    assert "No space left on device" in out.output, out.output  # 200 MB into 64 MB


def test_timeout_kills_the_command_tree(engine, tmp_path):
    backend = DockerBackend(SandboxConfig(backend="docker", image=BASE), "to", str(tmp_path / "to"))
    check_timed_out_tree(*_run(timed_out_tree(backend, BASE)))


# -- images ---------------------------------------------------------------------------------


def test_missing_image_fails_only_its_prompts(engine, make_cfg, server, tmp_path, run_dir):
    rows = [
        {"prompt": script(sh("echo ok"), DONE, text="good1")},
        {"prompt": script(sh("echo ok"), DONE, text="lost"), "image": "hermes-test/missing:nope"},
        {"prompt": script(sh("echo ok"), DONE, text="good2"), "image": IMG_B},
    ]
    code, stats = run_inprocess(docker_cfg(make_cfg, dataset=write_jsonl(tmp_path / "d.jsonl", rows)), run_dir)
    assert code == 1
    assert stats["prompts"]["ok"] == 2 and stats["failed_by_error"] == {"ImageUnavailable": 1}
    (failure,) = read_jsonl(run_dir / "failures.jsonl")
    assert "hermes-test/missing:nope" in failure["error"] and "not present locally" in failure["error"]
    assert server.calls_for("lost") == []  # no token spent on it
    assert containers_of(engine, run_dir) == []


def test_engine_unreachable_is_a_clear_error(make_cfg, tmp_path, run_dir, monkeypatch, caplog):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    rows = [{"prompt": "p"}]
    code, _ = run_inprocess(docker_cfg(make_cfg, dataset=write_jsonl(tmp_path / "d.jsonl", rows)), run_dir)
    assert code == 2
    assert "Docker engine is not reachable" in caplog.text


# -- cleanup --------------------------------------------------------------------------------


def test_cleanup_after_failures_and_timeouts(engine, make_cfg, server, tmp_path, run_dir):
    rows = [
        {"prompt": script(sh("echo hi"), {"fail": [{"status": 400}]}, text="modelfail")},
        {"prompt": script(sh("sleep 60", timeout=60), DONE, text="slow")},
        {"prompt": script(sh("echo fine"), DONE, text="fine")},
    ]
    cfg = docker_cfg(make_cfg, "limits.timeout_s=15", dataset=write_jsonl(tmp_path / "d.jsonl", rows))  # "fine": loaded
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 1
    assert stats["prompts"]["ok"] == 2 and stats["prompts"]["failed"] == 1  # "slow": kept at its time limit
    assert stats["stop_reasons"]["timeout"] == 1
    assert containers_of(engine, run_dir) == []


def test_a_container_the_engine_cannot_remove_fails_its_prompt(engine, make_cfg, server, tmp_path, run_dir, caplog):
    """The engine really refuses: the container's writable layer is made immutable (chattr +i) while the prompt runs.
    The prompt fails with ContainerNotRemoved (ledger, log), the run exits 1, and no process of it is left."""
    gate = "while [ ! -e /tmp/go ]; do sleep 0.1; done; echo released"  # the prompt waits for the test's go
    rows = [{"prompt": script(sh(gate, timeout=60), DONE, text="stuck")}]
    cfg = docker_cfg(make_cfg, dataset=write_jsonl(tmp_path / "d.jsonl", rows))
    pinned: list[tuple[str, str]] = []

    def pin() -> None:
        def prompts() -> list:
            return [c for c in containers_of(engine, run_dir)
                    if c["Labels"].get(docker_orphans.PROMPT_KEY) != "probe" and c["State"] == "running"]  # fmt: skip

        (c,) = wait_for(prompts, 60, "the prompt's container", interval=0.2)
        upper = engine.api.inspect_container(c["Id"])["GraphDriver"]["Data"]["UpperDir"]
        subprocess.run(["chattr", "+i", upper], check=True)
        pinned.append((c["Id"], upper))
        engine.api.exec_start(engine.api.exec_create(c["Id"], ["touch", "/tmp/go"])["Id"])

    t = threading.Thread(target=pin, daemon=True)
    t.start()
    try:
        code, stats = run_inprocess(cfg, run_dir)
        t.join(5)
        assert pinned, "the container was never pinned"
        assert code == 1 and stats["failed_by_error"] == {"ContainerNotRemoved": 1}, stats
        (failure,) = read_jsonl(run_dir / "failures.jsonl")
        assert failure["error"].startswith(f"container {pinned[0][0][:12]} could not be removed ("), failure
        assert "ContainerNotRemoved" in caplog.text or "could not be removed" in caplog.text
        assert docker_procs.container_pids(pinned[0][0]) == set()
    finally:
        for cid, upper in pinned:
            subprocess.run(["chattr", "-i", upper], check=False)
            try:
                engine.api.remove_container(cid, v=True, force=True)
            except Exception:  # noqa: BLE001 - gone already
                pass


def _cli(server, tmp_path: Path, run_dir: Path, dataset: Path, *extra: str) -> list[str]:
    args = base_overrides(server, tmp_path) + [
        "run_name=kill", f"hydra.run.dir={run_dir}", f"dataset_file={dataset}", "sandbox=docker",
        f"sandbox.image={BASE}", "distribution=terminal_only", "num_workers=2", *extra,
    ]  # fmt: skip
    return [sys.executable, str(ROOT / "run.py"), *args]


@pytest.mark.parametrize("how", ["sigkill", "sigint"])
def test_interrupted_runner_leaves_no_container(engine, server, tmp_path, run_dir, how):
    """kill -9: the runner's watchdog removes its containers; Ctrl-C removes them at once; the resume completes."""
    rows = [{"prompt": script(sh("echo started; sleep 60", timeout=90), DONE, text=f"{how}{i}")} for i in range(3)]
    dataset = write_jsonl(tmp_path / "d.jsonl", rows)
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}

    def sessions() -> tuple[int, int]:
        return len(server.requests), len(containers_of(engine, run_dir))

    with LiveRunner(_cli(server, tmp_path, run_dir, dataset), env) as runner:
        # both in-flight prompts have their container and run their (slow) command
        runner.wait_for(lambda: min(sessions()) >= 2, 60, "two sessions", lambda: f"requests, containers: {sessions()}")
        time.sleep(0.5)
        before = {c["Id"] for c in containers_of(engine, run_dir)}
        code, out = runner.end(signal.SIGKILL if how == "sigkill" else signal.SIGINT)
    if how == "sigint":
        assert code == 130, out
        assert containers_of(engine, run_dir) == []
    else:
        assert code == -signal.SIGKILL, out
        assert len(before) >= 2
        wait_for(lambda: containers_of(engine, run_dir) == [], 30, "the watchdog to remove the orphans", interval=0.2)
    server.handler = lambda body, srv: srv.completion(body, DONE)  # the model now answers without a command
    res = subprocess.run(
        _cli(server, tmp_path, run_dir, dataset), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert containers_of(engine, run_dir) == []
    assert len(read_jsonl(run_dir / "trajectories.jsonl")) == 3


def _run(coro):
    return asyncio.run(coro)
