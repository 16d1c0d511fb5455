"""The progress display at terminal widths, its plain lines off a terminal, and run.log of a real run."""

from __future__ import annotations

import io
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from hermes_runner.model.ratelimit import Throttle
from hermes_runner.run import progress
from hermes_runner.run.progress import RunProgress, short_name
from hermes_runner.testing.scripted_server import ScriptedServer
from hermes_runner.usage import Usage

from tests.helpers.run import ROOT, base_overrides, script, write_jsonl

LONG_NAME = "sweep-model=Qwen/Qwen3-30B-A3B-Instruct-2507,distribution=science,seed=1"
BUSY = Throttle(
    retries=12, rate_limited=3, backoff_s=4.0, backing_off_s=2.5, waiting=2, concurrency=6, max_concurrency=8
)


def terminal(width: int) -> Console:
    return Console(width=width, file=io.StringIO(), force_terminal=True, color_system=None)


def frame(progress: RunProgress) -> list[str]:
    """One frame of the live display, as the terminal shows it."""
    progress.console.print(progress._progress.get_renderable())
    return progress.console.file.getvalue().rstrip("\n").split("\n")


def busy_run(console: Console, **kwargs) -> RunProgress:
    p = RunProgress(LONG_NAME, 200, console=console, throttle=lambda: BUSY, **kwargs)
    for status in ["ok"] * 11 + ["discarded", "failed"]:
        p.advance(status, Usage(prompt_tokens=200, completion_tokens=51, total_tokens=251, cost_usd=0.0012), 12)
    return p


@pytest.mark.parametrize("width", [80, 120, 160])
def test_two_rows_fit_the_terminal(width: int) -> None:
    p = busy_run(terminal(width))
    assert p.live
    bar, status = frame(p)
    assert len(bar) <= width and len(status) <= width
    # Row 1: the name (shortened, both ends kept), the bar, M/N, elapsed and ETA, never squeezed out.
    assert (
        bar.startswith(short_name(LONG_NAME) + " ")
        and "…" in bar
        and bar.rstrip().endswith(re.search(r"ETA \S+", bar)[0])
    )
    assert re.search(r"━{1,}", bar) and " 13/200 " in bar and re.search(r" \d:\d\d:\d\d ETA \d:\d\d:\d\d$", bar)
    assert len(re.search(r"[━╸ ]{10,}", bar)[0]) >= 10  # the bar keeps room to move
    # Row 2: counts first, then tokens, cost, retries and throttling, its tail cut at the width.
    assert status.startswith("ok 11 discarded 1 failed 1 in flight 12 | 3,263 tok")
    if width >= 160:
        assert status.endswith("retries 12 429s 3 backing off 2.5s throttled 2 concurrency 6/8")
        assert "$0.0156 (projected $0.2400)" in status
    else:
        assert status.endswith("…")


def test_short_names_keep_both_ends() -> None:
    assert short_name("run") == "run"
    name = short_name(LONG_NAME)
    assert len(name) == 24 and name.startswith("sweep-model=Qwen") and name.endswith("seed=1")


class Clock:
    """Stands in for the `time` module of hermes_runner.run.progress: its monotonic() moves when a test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_plain_lines_off_a_terminal(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a terminal: no live rows; a plain line every `every_percent` of the prompts or `interval_s`."""
    clock = Clock()  # no time passes but what the test lets pass, however slow the machine
    monkeypatch.setattr(progress, "time", clock)
    with caplog.at_level(logging.INFO, logger="hermes_runner.run.progress"):
        p = RunProgress("job", 40, console=Console(file=io.StringIO()), interval_s=0.2, every_percent=25, min_gap_s=0)
        assert not p.live
        with p:
            for _ in range(10):
                p.advance("ok", Usage(total_tokens=10), 2)
        lines = [r.getMessage() for r in caplog.records]
        assert lines == [lines[0]] and lines[0].startswith("job: 10/40 (25%) elapsed 0:00:00 ETA 0:00:")
        assert "| ok 10 discarded 0 failed 0 in flight 2 | 100 tok" in lines[0]
        p.advance("failed", Usage(), 1)
        p.refresh(1)
        assert len(caplog.records) == 1  # neither 25% more nor the interval yet
        clock.now += 0.25
        p.refresh(1)
        assert caplog.records[-1].getMessage().startswith("job: 11/40 (28%)")
        assert not getattr(caplog.records[-1], "file_only", False)  # (off a terminal it goes to stderr too)
    assert p.console.file.getvalue() == ""  # no bar written into a log file


def test_retries_are_one_periodic_line_not_one_per_event(caplog: pytest.LogCaptureFixture) -> None:
    state = Throttle(concurrency=8, max_concurrency=8)
    with caplog.at_level(logging.INFO):
        p = RunProgress(
            "job", 10, console=Console(file=io.StringIO()), throttle=lambda: state, every_percent=50, min_gap_s=0
        )
        for _ in range(5):
            state.retries += 3
            state.rate_limited += 1
            state.concurrency = 6
            p.advance("ok", Usage(), 0)
    summaries = [r.getMessage() for r in caplog.records if "since the last line" in r.getMessage()]
    assert summaries == [
        "model calls since the last line: 15 retries, 5 429s; concurrency 6/8; 0.0s backing off in all"
    ]


def test_retries_reported_by_prompts_show_without_a_local_limiter() -> None:
    """Under Ray the limiters live in the actors: the retries the prompts report still show."""
    p = RunProgress("job", 10, console=Console(file=io.StringIO()))
    p.advance("ok", Usage(), 0, retries=3)
    assert p.counts().endswith("| retries 3") and p.endpoint().retries == 3


def test_on_a_terminal_the_plain_lines_go_to_the_log_file_only(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="hermes_runner.run.progress"):
        busy_run(terminal(100), every_percent=5, min_gap_s=0)
    assert caplog.records and all(getattr(r, "file_only", False) for r in caplog.records)


def test_run_log_holds_plan_progress_and_summary(server: ScriptedServer, tmp_path: Path) -> None:
    """A real run with stderr to a file: plain progress lines as it goes, and run.log has them too."""
    ds = write_jsonl(
        tmp_path / "d.jsonl",
        [{"prompt": script({"reasoning": "r", "content": "ok", "sleep": 0.15}, text=f"p{i}")} for i in range(20)]
        + [{"prompt": script({"fail": [{"status": 400, "message": "bad request"}]}, text="fails")}]
        + [{"prompt": script({"fail": [{"status": 429, "retry_after": 0.3}], "reasoning": "r", "content": "ok"})}],
    )
    run_dir = tmp_path / "logged"
    with (tmp_path / "stderr.txt").open("w") as err:  # stderr to a file, as under nohup or SLURM
        res = subprocess.run(
            [
                sys.executable,
                str(ROOT / "run.py"),
                *[o for o in base_overrides(server, tmp_path) if o != "progress=false"],
                "run_name=logged",
                f"dataset_file={ds}",
                f"hydra.run.dir={run_dir}",
                "num_workers=2",
                "progress_every_percent=0",  # by time only
                "progress_interval_s=0.3",
            ],
            cwd=ROOT, stderr=err, stdout=subprocess.PIPE, text=True, timeout=300,
        )  # fmt: skip
    assert res.returncode == 1, res.stdout  # (one prompt fails)
    stderr = (tmp_path / "stderr.txt").read_text()
    progress = [line for line in stderr.splitlines() if re.search(r"logged: \d+/22 \(\d+%\)", line)]
    assert len(progress) >= 4 and "logged: 22/22 (100%)" in progress[-1]
    assert "━" not in stderr  # no bar in a file
    log = (run_dir / "run.log").read_text()
    assert "logged: 22 prompts in scope, 0 already done, 22 to run" in log
    assert sum(bool(re.search(r"logged: \d+/22 \(\d+%\) elapsed", line)) for line in log.splitlines()) >= 4
    assert "Done: 21 kept = 21 completed + 0 partial + 0 stopped; 0 discarded; 1 failed (ModelCallError 1)" in log
    assert f"details in {run_dir / 'failures.jsonl'}; run the same command again to retry them" in log
    assert "prompts/s" in log and "Trajectories:" in log and "Report:" in log
    # The 429 and its retry: one summary line (each event is DEBUG), and in the end summary.
    assert "retry 1 in" not in stderr and "concurrency 4 ->" not in stderr
    assert re.search(r"model calls since the last line: 1 retries, 1 429s; concurrency \d/2", stderr)
    assert re.search(r"1 retries, 1 429s, 0\.[3-9]s backing off", log)
    assert "Done:" in res.stdout  # (and the user sees the summary as before)
