"""feed=atropos against Atropos' real API server (run-api, from its own venv) and a scripted trainer: the runner
registers once the trainer has, holds new prompts while the trainer's queue is full, and pushes each row's
samples as one scored group (tokens, masks, scores, logprobs); killed with -9 and resumed, every group reaches
the trainer once, also the one whose acknowledgement the kill lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

from hermes_runner.testing.script import END_ID, LOGPROB

from tests.helpers.atropos import Trainer, api_server
from tests.helpers.crash import cli_args, start
from tests.helpers.run import ROOT, read_jsonl, script, write_jsonl
from tests.helpers.wait import exited, wait_for

ROWS = {"row0": "final answer", "row1": "final answer", "row2": "wrong"}  # text -> target (row2's scores 0)


def _row_of(seq: list[int]) -> str:
    text = bytes(t for t in seq if t < 256).decode(errors="replace")
    return next(r for r in ROWS if r in text)


def _pushed(run_dir) -> list[str]:
    path = run_dir / "feed.jsonl"
    return [r["group"] for r in read_jsonl(path) if r["state"] == "pushed"] if path.exists() else []


def test_groups_reach_the_trainer_once_with_back_pressure_across_a_kill(server, tmp_path):
    rows = [{"prompt": script({"content": "final answer"}, text=t), "target": tgt} for t, tgt in ROWS.items()]
    ds, run_dir, log = write_jsonl(tmp_path / "d.jsonl", rows), tmp_path / "run", tmp_path / "runner.log"
    with api_server(tmp_path / "api.log") as url:
        trainer = Trainer(url, batch_size=2)  # one group of 2 samples per batch: the queue is full at one group
        args = cli_args(
            server, tmp_path, ds, run_dir, "feed=atropos", f"feed.url={url}", "feed.poll_interval_s=0.05",
            "scorer=match", "samples_per_prompt=2", "num_workers=1",
            "distribution=terminal_only", "filters.require_reasoning=false",
        )  # fmt: skip
        proc = start(args, log)
        wait_for(lambda: "holding new prompts" in log.read_text(), 60, "the runner to hold", gone=exited(proc))
        # every acknowledged group is in the server's queue (its record follows the acknowledgement)
        wait_for(lambda: trainer.queued() == len(_pushed(run_dir)) >= 1, 30, "the record of the push")
        assert len(read_jsonl(run_dir / "ledger.jsonl")) < 2 * len(ROWS)  # held before the last row
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # as if the kill came between the server's acknowledgement and its record: the intent stands alone
        lines = (run_dir / "feed.jsonl").read_text().splitlines(keepends=True)
        lost = json.loads(lines[-1])
        assert lost["state"] == "pushed"
        (run_dir / "feed.jsonl").write_text("".join(lines[:-1]))

        got: list[dict] = []
        pulling = threading.Event()

        def pull() -> None:
            while not pulling.is_set():
                batch = trainer.pull()
                got.extend(batch)
                pulling.wait(0 if batch else 0.01)  # (not a busy loop on the server's CPU)

        puller = threading.Thread(target=pull)
        puller.start()
        try:
            argv = [sys.executable, str(ROOT / "run.py"), *args]
            done = subprocess.run(argv, cwd=ROOT, timeout=120, capture_output=True, text=True)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            wait_for(lambda: len(got) >= len(ROWS), 30, "every group at the trainer", state=lambda: len(got))
        finally:
            pulling.set()
            puller.join()
        assert trainer.pull() == [] and trainer.queued() == 0  # nothing more: no group came twice
    assert sorted(_row_of(g["tokens"][0]) for g in got) == sorted(ROWS)
    feed = read_jsonl(run_dir / "feed.jsonl")
    assert [r["group"] for r in feed if r.get("reconciled")] == [lost["group"]]  # found at the server, not re-sent
    assert sorted(r["group"] for r in feed if r["state"] == "pushed") == sorted({r["group"] for r in feed})
    for g in got:
        row = _row_of(g["tokens"][0])
        assert len(g["tokens"]) == 2 and all(_row_of(t) == row for t in g["tokens"])
        assert g["scores"] == [1.0, 1.0] if ROWS[row] == "final answer" else [0.0, 0.0]
        for tokens, masks, lps in zip(g["tokens"], g["masks"], g["inference_logprobs"], strict=True):
            learned = [t for t, m in zip(tokens, masks, strict=True) if m != -100]
            assert all(m in (-100, t) for t, m in zip(tokens, masks, strict=True))
            assert bytes(learned[:-1]).decode() == "final answer" and learned[-1] == END_ID
            assert {lp for lp, m in zip(lps, masks, strict=True) if m != -100} == {LOGPROB}
            assert {lp for lp, m in zip(lps, masks, strict=True) if m == -100} == {1.0}
