"""The model server's lifecycle, with real subprocesses: start, health, errors, stop on end/Ctrl-C/kill -9.

The served command is the scripted OpenAI-compatible server (or a command that fails), started by
`run.py` exactly as a user's own server command would be.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from hermes_runner.model.serve import server_argv

from tests.helpers.run import ROOT, compose_cfg, read_jsonl, run_cli, script, write_jsonl
from tests.helpers.wait import exited, wait_for

SCRIPTED = ["{python}", "-m", "hermes_runner.testing.scripted_server", "--port", "{port}"]


def command_override(argv: list[str]) -> str:
    quoted = ("'" + a.replace("\\", "\\\\").replace("'", "\\'") + "'" for a in argv)
    return "model.serve.command=[" + ",".join(quoted) + "]"


def served_args(tmp_path: Path, dataset: Path, argv: list[str], *extra: str) -> list[str]:
    return [
        "model=local_server",
        "model.serve.enabled=true",
        "model.base_url=served",
        command_override(argv),
        "model.retry_initial_wait_s=0.01",
        "progress=false",
        f"dataset_file={dataset}",
        "run_name=t",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"sandbox.local.root={tmp_path / 'sandboxes'}",
        *extra,
    ]


def run_log(tmp_path: Path) -> str:
    """The run's log file (the console wraps long lines)."""
    return (tmp_path / "run" / "run.log").read_text()


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(pids: list[int], timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def server_pids(run_dir: Path) -> list[int]:
    """Server pids the guard reported in the run's model_server.log."""
    text = (run_dir / "model_server.log").read_text()
    return [int(m) for m in re.findall(r"\[serve-guard\] server pid (\d+)", text)]


def logged(path: Path, needle: str) -> bool:
    return path.exists() and needle in path.read_text(errors="replace")


def test_served_run_end_to_end_stops_server(tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(3)])
    res = run_cli(*served_args(tmp_path, ds, SCRIPTED))
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = tmp_path / "run"
    rows = read_jsonl(run_dir / "trajectories.jsonl")
    assert len(rows) == 3
    assert all("<tool_call>" in r["conversations"][2]["value"] for r in rows)  # served replies were used
    pids = server_pids(run_dir)
    assert len(pids) == 1
    assert wait_gone(pids, 0) == []  # stopped before the runner exited


def test_server_that_exits_gives_log_tail(tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    boom = ["{python}", "-c", "import sys; print('boom: unknown flag --frobnicate', flush=True); sys.exit(3)"]
    res = run_cli(*served_args(tmp_path, ds, boom))
    assert res.returncode == 2, res.stdout + res.stderr
    out = run_log(tmp_path)
    assert "exited with code 3 before it was ready" in out
    assert "boom: unknown flag --frobnicate" in out  # the server's own words reach the user
    assert not (tmp_path / "run" / "trajectories.jsonl").read_text()  # nothing ran, nothing lost


def test_server_never_healthy_times_out_and_is_stopped(tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    sleeper = ["{python}", "-c", "import time; print('loading weights...', flush=True); time.sleep(600)"]
    started = time.monotonic()
    res = run_cli(*served_args(tmp_path, ds, sleeper, "model.serve.startup_timeout_s=1.5"))
    assert res.returncode == 2, res.stdout + res.stderr
    out = run_log(tmp_path)
    assert "not healthy" in out and "after 1.5s" in out and "loading weights..." in out
    assert time.monotonic() - started < 60
    assert wait_gone(server_pids(tmp_path / "run"), 0) == []


def test_unknown_command_and_placeholder_are_config_errors(tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    res = run_cli(*served_args(tmp_path, ds, ["no-such-server-binary", "--port", "{port}"]))
    assert res.returncode == 2
    assert "model server command not found: 'no-such-server-binary'" in run_log(tmp_path)
    res = run_cli(*served_args(tmp_path, ds, ["{python}", "--model", "{model_path}"]))
    assert res.returncode == 2
    assert "placeholder {model_path}" in run_log(tmp_path)


def _start_slow_run(tmp_path: Path, argv: list[str]) -> tuple[subprocess.Popen, Path]:
    """A run whose prompts each wait 60 s in the server: it is mid-batch when we signal it."""
    ds = write_jsonl(
        tmp_path / "d.jsonl", [{"prompt": script({"sleep": 60, "content": "late"}, text=f"p{i}")} for i in range(4)]
    )
    run_dir = tmp_path / "run"
    out = (tmp_path / "runner.out").open("w")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), *served_args(tmp_path, ds, argv, "num_workers=2")],
        cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "HYDRA_FULL_ERROR": "0"},
    )  # fmt: skip
    wait_for(lambda: logged(run_dir / "run.log", "model server ready"), 60, "the model server", gone=exited(proc))
    time.sleep(0.5)  # let the prompts reach the server
    return proc, run_dir


# `sh -c "...; true"` keeps sh as the server's parent: the guard must stop grandchildren too.
WRAPPED = ["sh", "-c", "{python} -m hermes_runner.testing.scripted_server --port {port}; true"]


@pytest.mark.parametrize("argv", [SCRIPTED, WRAPPED], ids=["direct", "wrapped"])
def test_ctrl_c_stops_server(tmp_path, argv):
    proc, _ = _start_slow_run(tmp_path, argv)
    tree = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert len(tree) >= (2 if argv is SCRIPTED else 3)  # guard, (sh,) server
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 130
    assert wait_gone(tree, 0) == []  # gone by the time the runner exits
    assert "Run the same command again" in (tmp_path / "runner.out").read_text()


@pytest.mark.parametrize("argv", [SCRIPTED, WRAPPED], ids=["direct", "wrapped"])
def test_kill_9_of_runner_stops_server(tmp_path, argv):
    proc, run_dir = _start_slow_run(tmp_path, argv)
    tree = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert set(server_pids(run_dir)) <= set(tree)
    proc.kill()
    proc.wait(10)
    assert wait_gone(tree) == []


def test_ctrl_c_while_server_starts(tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    sleeper = ["{python}", "-c", "import time; print('loading', flush=True); time.sleep(600)"]
    out = (tmp_path / "runner.out").open("w")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), *served_args(tmp_path, ds, sleeper)],
        cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "HYDRA_FULL_ERROR": "0"},
    )  # fmt: skip
    log = tmp_path / "run" / "model_server.log"
    wait_for(lambda: logged(log, "loading"), 60, "the server loading", gone=exited(proc))
    tree = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 130
    assert wait_gone(tree, 0) == []


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("vllm_serve", ["vllm", "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", "4321"]),
        ("llama_server", ["llama-server", "--model", "{gguf}", "--alias", "m", "--host", "127.0.0.1"]),
        ("gguf", ["{python}", "-m", "hermes_runner.model.llama_server", "--model", "{gguf}", "--model_alias", "m"]),
    ],
)
def test_shipped_server_configs_fill_their_commands(config, expected, tmp_path, monkeypatch):
    """The example configs compose and their placeholders fill; the server binaries are found on PATH."""
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for exe in ("vllm", "llama-server"):  # stand-ins for the installed servers: only the lookup is tested
        (bin_dir / exe).write_text("#!/bin/sh\n")
        (bin_dir / exe).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    cfg = compose_cfg([f"model={config}", f"model.serve.model_path={gguf}"])
    assert cfg.model.serve.enabled and cfg.model.base_url == "served"
    argv = server_argv(cfg.model, 4321)
    subs = {"{gguf}": str(gguf), "{python}": sys.executable}
    want = [subs.get(a, a) for a in expected]
    want[0] = str(bin_dir / want[0]) if not want[0].startswith("/") else want[0]
    assert argv[: len(want)] == want
    assert "4321" in argv and not any("{" in a for a in argv)


def test_server_dying_mid_run_is_reported_and_its_prompts_fail(tmp_path):
    ds = write_jsonl(
        tmp_path / "d.jsonl", [{"prompt": script({"sleep": 5, "content": "x"}, text=f"p{i}")} for i in range(2)]
    )
    dies = [
        "{python}", "-c",
        (
            "import os, sys, threading; sys.argv = ['s', '--port', '{port}']; "
            "threading.Timer(2.0, lambda: os._exit(7)).start(); "
            "from hermes_runner.testing.scripted_server import main; main()"
        ),
    ]  # fmt: skip
    res = run_cli(*served_args(tmp_path, ds, dies))
    # The endpoint now refuses connections: the run stops (exit 4), and a rerun retries the prompts.
    assert res.returncode == 4, res.stdout + res.stderr
    assert "Stopped: connection refused by http://127.0.0.1:" in res.stdout
    assert "the model server exited with code 7 during the run" in run_log(tmp_path)
    stats = (tmp_path / "run" / "statistics.json").read_text()
    assert '"failed": 2' in stats
