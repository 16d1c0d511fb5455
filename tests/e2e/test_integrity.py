"""Run integrity under edits, kills, full disks and secrets (issue 15): what is written is exactly right."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.crash import kill_mid_run
from tests.helpers.run import ROOT, base_overrides, read_jsonl, run_cli, run_inprocess, script, write_jsonl
from tests.helpers.wait import exited, wait_for

TERM = {"name": "terminal", "arguments": {"command": "echo hi"}}


def long_task(i: int, turns: int = 8) -> str:
    return script(*[{"tool_calls": [TERM], "reasoning": "r"}] * turns, {"content": "done", "reasoning": "r"},
                  text=f"long {i}")  # fmt: skip


def start_cli(args: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), *args],
        cwd=ROOT,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "HYDRA_FULL_ERROR": "0", **(env or {})},
    )


def cli_args(server, tmp_path: Path, ds: Path, run_dir: Path, *extra: str) -> list[str]:
    return [*base_overrides(server, tmp_path), f"dataset_file={ds}", "run_name=integrity",
            f"hydra.run.dir={run_dir}", *extra]  # fmt: skip


# -- 1. rows edited or removed ----------------------------------------------------------


def test_rows_edited_or_removed_leave_the_derived_files(make_cfg, tmp_path, run_dir, server, caplog):
    rows = [{"prompt": f"p{i}"} for i in range(12)]
    rows.append({"prompt": script({"fail": [{"status": 404}]}, text="broken")})
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 1 and stats["prompts"]["ok"] == 12 and stats["prompts"]["failed"] == 1
    # Edit two rows, remove one and the failing one: 11 rows, indices shifted.
    now = [dict(r) for r in rows[:12]]
    now[3], now[5] = {"prompt": "p3 edited"}, {"prompt": "p5 edited"}
    del now[7]
    write_jsonl(ds, now)
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert [e["conversations"][1]["value"] for e in entries] == [r["prompt"] for r in now]
    assert [e["prompt_index"] for e in entries] == list(range(11))
    p = stats["prompts"]
    assert (p["total"], p["ok"], p["failed"], p["pending"]) == (11, 11, 0, 0)
    assert stats["not_in_dataset"] == {"prompts": 4, "ok": 3}  # p3, p5, p7 and the failed one
    saved = json.loads((run_dir / "statistics.json").read_text())
    assert saved["prompts"] == p and saved["tool_statistics"]["terminal"]["count"] == 11
    ckpt = json.loads((run_dir / "checkpoint.json").read_text())
    assert ckpt["completed_prompts"] == list(range(11)) and ckpt["failed_prompts"] == []
    assert sum(b["processed"] for b in ckpt["batch_stats"].values()) == 11
    assert "4 prompts recorded in" in caplog.text and "not in the current dataset" in caplog.text
    # Nothing deleted: the old trajectories stay in the batch files and the ledger.
    kept = [json.loads(line)["conversations"][1]["value"] for f in run_dir.glob("batch_*.jsonl")
            for line in f.read_text().splitlines()]  # fmt: skip
    assert {"p3", "p5", "p7"} <= set(kept)
    # The rows come back: their old trajectories are used again, nothing runs.
    write_jsonl(ds, rows[:12])
    before = len(server.requests)
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0 and len(server.requests) == before
    assert [e["conversations"][1]["value"] for e in read_jsonl(run_dir / "trajectories.jsonl")] == [
        r["prompt"] for r in rows[:12]
    ]
    assert stats["prompts"]["ok"] == 12 and stats["not_in_dataset"] == {"prompts": 3, "ok": 2}  # (+ the failed one)


# -- 9. max_turns stops ------------------------------------------------------------------


def test_max_turns_stops_are_counted_and_the_summary_adds_up(make_cfg, tmp_path, run_dir, server, capsys):
    rows = [{"prompt": long_task(0, turns=5)}, {"prompt": "short"}, {"prompt": long_task(1, turns=5)}]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    code, stats = run_inprocess(make_cfg("max_turns=3", dataset=ds), run_dir)
    assert code == 0
    p = stats["prompts"]
    assert p["ok"] == 3 and p["completed"] == 1 and p["partial"] == 0 and p["stopped"] == 2
    assert p["completed"] + p["partial"] + p["stopped"] == p["ok"]
    assert stats["stop_reasons"] == {"max_turns": 2, "final_answer": 1}
    out = capsys.readouterr().out
    assert "3 kept = 1 completed + 0 partial + 2 stopped (max_turns 2)" in out
    assert stats["stopped_reasons"] == {"max_turns": 2}


# -- 7. a failed start writes no guard ----------------------------------------------------


def test_a_failed_start_does_not_lock_in_its_config(make_cfg, tmp_path, run_dir, server, caplog):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "a"}, {"prompt": "b"}])
    code, _ = run_inprocess(make_cfg(dataset=tmp_path / "typo.jsonl"), run_dir)
    assert code == 2 and "dataset_file not found" in caplog.text
    assert not (run_dir / "run.json").exists() and not (run_dir / "invocations.jsonl").exists()
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)  # the corrected command, no force_resume
    assert code == 0 and stats["prompts"]["ok"] == 2
    assert json.loads((run_dir / "run.json").read_text())["data_config"]["dataset_file"] == str(ds)


# -- 5. temp files of killed atomic writes ------------------------------------------------


def test_temp_files_of_a_killed_final_write_are_removed_by_the_next_run(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(3)])
    assert run_inprocess(make_cfg(dataset=ds), run_dir)[0] == 0
    # A real kill -9 in the middle of writing trajectories.jsonl ...
    killer = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from hermes_runner.rundir.store import atomic_write\n"
        "def lines():\n"
        "    yield b'x' * 100000\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "atomic_write(Path(sys.argv[1]) / 'trajectories.jsonl', lines())\n"
    )
    proc = subprocess.run([sys.executable, "-c", killer, str(run_dir)], cwd=ROOT, env={**os.environ,
                          "PYTHONPATH": str(ROOT)}, check=False)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL
    left = [p for p in run_dir.iterdir() if p.name.startswith(".trajectories.jsonl.")]
    assert len(left) == 1 and left[0].stat().st_size >= 100000
    legacy = run_dir / ".statistics.json.k2j4_9ab"  # as older versions named them
    legacy.write_text("{}")
    mine = [run_dir / ".notes", run_dir / ".trajectories.jsonl.bak", run_dir / "notes.hr-tmp"]
    for p in mine:
        p.write_text("user file")
    assert run_inprocess(make_cfg(dataset=ds), run_dir)[0] == 0
    assert not left[0].exists() and not legacy.exists()
    assert all(p.read_text() == "user file" for p in mine)  # only the runner's own temp files go
    assert len(read_jsonl(run_dir / "trajectories.jsonl")) == 3


# -- 2. secrets ---------------------------------------------------------------------------

SECRET = "hr-s3cr3t-" + hashlib.sha256(str(time.time_ns()).encode()).hexdigest()[:20]


def test_no_resolved_secret_is_written_anywhere(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "a"}, {"prompt": script({"fail": [{"status": 400}]})}])
    run_dir = tmp_path / "run"
    env = {"HR_TEST_SECRET": SECRET, "HR_TEST_KEY": SECRET[::-1]}
    args = cli_args(
        server, tmp_path, ds, run_dir,
        "+model.default_headers.X-Api-Key=${oc.env:HR_TEST_SECRET}",
        "provider.only=[${oc.env:HR_TEST_SECRET}]",  # a data-defining option: into run.json
        "model.api_key_env=HR_TEST_KEY",
        "verbose=true",
    )  # fmt: skip
    first = run_cli(*args, env=env)
    assert first.returncode == 1, (first.stdout + first.stderr)[-3000:]
    assert server.requests, (first.stdout + first.stderr)[-3000:]
    headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
    assert headers["x-api-key"] == SECRET and headers["authorization"] == f"Bearer {SECRET[::-1]}"  # used ...
    # ... a resumed, force-resumed run with a changed secret logs its config diff ...
    env2 = {"HR_TEST_SECRET": SECRET + "-2", "HR_TEST_KEY": SECRET[::-1]}
    second = run_cli(*args, "force_resume=true", env=env2)
    assert second.returncode == 0, second.stderr[-3000:]
    # ... and written nowhere: not in any file of the run dir, nor in what the runner printed.
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {"invocations.jsonl", "run.json", "config.yaml", "hydra.yaml", "overrides.yaml", "failures.jsonl",
            "statistics.json", "report.html"} <= {p.name for p in files}  # fmt: skip
    for secret in (SECRET, SECRET[::-1], SECRET + "-2"):
        for p in files:
            assert secret.encode() not in p.read_bytes(), p
        for out in (first, second):
            assert secret not in out.stdout + out.stderr
    inv = read_jsonl(run_dir / "invocations.jsonl")
    assert inv[0]["config"]["model"]["default_headers"] == {"X-Api-Key": "${oc.env:HR_TEST_SECRET}"}
    assert json.loads((run_dir / "run.json").read_text())["data_config"]["provider"]["only"] == [
        "${oc.env:HR_TEST_SECRET}"
    ]


# -- 3/4. spend and invocations of cancelled and killed prompts ---------------------------


def test_spend_of_prompts_cancelled_by_ctrl_c_counts_in_the_budget(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": long_task(i)} for i in range(4)])
    run_dir = tmp_path / "run"
    args = cli_args(server, tmp_path, ds, run_dir, "num_workers=4", "limits.max_tokens_total=100000")
    log = tmp_path / "cli.log"
    server.hold(after=8)  # 8 calls answered, fewer than one prompt's 9: once all 4 wait, none has ended
    proc = start_cli(args, log)
    try:
        wait_for(lambda: server.held == 4, 60, "every prompt mid-conversation", gone=exited(proc), interval=0.02)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130, log.read_text()[-3000:]
    finally:
        server.release()
    stats = json.loads((run_dir / "statistics.json").read_text())
    ledger = run_dir / "ledger.jsonl"
    assert stats["prompts"]["ok"] == 0 and not (ledger.exists() and ledger.read_bytes())  # no prompt ended
    calls, sent = stats["model_calls"], len(server.requests)
    assert calls["answered"] == stats["api_calls"] <= sent <= calls["started"] <= calls["answered"] + 4
    assert stats["api_calls"] >= 6 and stats["usage"]["total_tokens"] > 0
    spent = stats["usage"]["total_tokens"]
    from hermes_runner.rundir.reader import RunData

    assert RunData.load(run_dir).stats.usage.total_tokens == spent  # the report counts them too
    # A budget below what was spent: nothing starts.
    again = run_cli(*args[:-1], f"limits.max_tokens_total={spent}")
    assert again.returncode == 3, again.stderr[-3000:]
    assert len(server.requests) == sent
    inv = read_jsonl(run_dir / "invocations.jsonl")
    assert [i["invocation"] for i in inv] == [0, 1] and all(i["ended"] for i in inv)


@pytest.mark.slow
def test_calls_and_invocations_of_killed_runs_are_recorded(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": long_task(i, turns=4)} for i in range(12)])
    run_dir = tmp_path / "run"
    server.latency = 0.05
    args = cli_args(server, tmp_path, ds, run_dir, "num_workers=4")
    # 60 model calls (5 a prompt); each kill after 12 of them, at a held call (mid-run by construction).
    assert kill_mid_run(args, tmp_path / "cli.log", server, random.Random(0), kills=3, calls=(12, 12))[0] == 3
    inv = read_jsonl(run_dir / "invocations.jsonl")
    assert [i["invocation"] for i in inv] == [0, 1, 2, 3]
    assert [i["ended"] is None for i in inv] == [True, True, True, False]
    stats = json.loads((run_dir / "statistics.json").read_text())
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert stats["prompts"]["ok"] == len(entries) == 12
    calls, sent = stats["model_calls"], len(server.requests)
    # Every call the server saw is counted, those of killed prompts included (at most the ones in flight
    # at each kill lack an answer).
    assert calls["answered"] == stats["api_calls"] <= sent <= calls["started"] <= calls["answered"] + 3 * 4
    assert stats["api_calls"] > sum(e["api_calls"] for e in entries)  # killed prompts' calls too
    assert stats["usage"]["total_tokens"] > sum(e["usage"]["total_tokens"] for e in entries)


# -- 8. a refused second runner ----------------------------------------------------------


def test_a_refused_second_runner_does_not_touch_the_live_run_dir(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": long_task(i, turns=50)} for i in range(4)])
    run_dir = tmp_path / "run"
    args = cli_args(server, tmp_path, ds, run_dir, "num_workers=4", "max_turns=60")
    log = tmp_path / "cli.log"
    server.hold(after=4)  # then every call waits: the live run cannot end while the second runner tries
    live = start_cli(args, log)
    try:
        wait_for(lambda: server.held, 60, "the live run waiting on a model call", interval=0.02)

        def snapshot() -> dict:
            return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (run_dir / ".hydra").iterdir()}

        before, lock, job_log = snapshot(), (run_dir / ".lock").read_bytes(), (run_dir / "run.log").read_bytes()
        second = run_cli(*args, "num_workers=2", "verbose=true")
        assert second.returncode == 2
        assert "in use by pid" in second.stderr and "one runner at a time" in second.stderr
        assert snapshot() == before and (run_dir / ".lock").read_bytes() == lock
        assert (run_dir / "run.log").read_bytes() == job_log
    finally:
        live.send_signal(signal.SIGINT)
        live.wait(30)
        server.release()


# -- 6. a full disk ----------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(mnt)],
                                           capture_output=True, check=False).returncode:  # fmt: skip
        pytest.skip("needs root to mount a small tmpfs")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_stops_with_one_clear_message_and_loses_nothing(server, tmp_path, small_disk):
    rows = [{"prompt": f"task {i} " + "x" * 6000} for i in range(80)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    run_dir = small_disk / "run"
    args = cli_args(server, tmp_path, ds, run_dir, "num_workers=4", "batch_size=10")
    full = run_cli(*args)
    out = full.stdout + full.stderr
    assert full.returncode == 5, out[-3000:]
    assert "Traceback" not in out and "Logging error" not in out
    assert out.count("the disk holding it is full") == 1 and "run the same command again" in out
    ledger = read_jsonl(run_dir / "ledger.jsonl")
    assert 0 < len(ledger) < len(rows)
    for p in run_dir.glob("*.jsonl"):  # every line whole (no torn writes)
        assert p.read_bytes().endswith(b"\n") or not p.read_bytes(), p
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    done = run_cli(*args)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert Counter(e["conversations"][1]["value"] for e in entries) == Counter(r["prompt"] for r in rows)
    assert [e["prompt_index"] for e in entries] == list(range(len(rows)))
    terminal = Counter(r["key"] for r in read_jsonl(run_dir / "ledger.jsonl") if r["status"] == "ok")
    assert len(terminal) == len(rows) and set(terminal.values()) == {1}
    batch_lines = sum(len(p.read_text().splitlines()) for p in run_dir.glob("batch_*.jsonl"))
    assert batch_lines == len(rows)  # no trajectory written twice, none without its record
