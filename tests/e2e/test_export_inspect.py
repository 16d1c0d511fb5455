"""`export --to inspect` of a real run, read by the real inspect-ai (its own venv, tests/consumers/inspect.txt):
`inspect_ai.log.read_eval_log`, and `inspect view` serving the log to a headless Chromium."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By

from hermes_runner.commands.export import main as export_main
from hermes_runner.testing.scripted_server import ScriptedServer

from tests.e2e.test_report import browser  # noqa: F401  (the module's headless Chromium fixture)
from tests.helpers.consumers import consumer_python, run_consumer
from tests.helpers.run import base_overrides, compose_cfg, run_inprocess, script, write_jsonl
from tests.helpers.sample_run import make_run
from tests.helpers.wait import exited, wait_for

CALLS = [
    {"name": "terminal", "arguments": {"command": "echo 42"}},
    {"name": "terminal", "arguments": {"command": "echo hi"}},
]
ROWS = [  # two parallel calls then a right answer; a wrong answer; a prompt the endpoint refuses for good
    {"prompt": script({"reasoning": "both", "tool_calls": CALLS}, {"reasoning": "ok", "content": "It is 42."}, text="a"),
     "target": "42"},
    {"prompt": script({"reasoning": "guess", "content": "It is 7."}, text="b"), "target": "8"},
    {"prompt": script({"fail": [{"status": 400, "message": "context length exceeded"}] * 2}, text="c"), "target": "1"},
]  # fmt: skip
K = 2  # samples per prompt: Inspect's epochs

READ = """
import json, sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1])
print(json.dumps({
    "status": log.status, "task": log.eval.task, "model": log.eval.model, "epochs": log.eval.config.epochs,
    "dataset": log.eval.dataset.name, "samples_in_dataset": log.eval.dataset.samples,
    "results": {s.name: {m: v.value for m, v in s.metrics.items()} for s in log.results.scores},
    "total": log.results.total_samples, "completed": log.results.completed_samples,
    "usage": {m: u.model_dump() for m, u in log.stats.model_usage.items()},
    "samples": [{
        "id": s.id, "epoch": s.epoch, "input": s.input, "roles": [m.role for m in s.messages],
        "calls": [[c.function for c in m.tool_calls] for m in s.messages if m.role == "assistant" and m.tool_calls],
        "tool_results": [m.function for m in s.messages if m.role == "tool"],
        "reasoning": [c.reasoning for m in s.messages if m.role == "assistant" and not isinstance(m.content, str)
                      for c in m.content if c.type == "reasoning"],
        "scores": {k: {"value": v.value, "explanation": v.explanation} for k, v in (s.scores or {}).items()},
        "error": s.error.message if s.error else None,
        "usage": {m: u.total_tokens for m, u in s.model_usage.items()},
        "disposition": s.metadata.get("disposition"),
    } for s in log.samples],
}))
"""


@pytest.fixture(scope="module")
def eval_file(_server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    _server.reset()
    base = tmp_path_factory.mktemp("inspect")
    ds = write_jsonl(base / "qa.jsonl", ROWS)
    cfg = compose_cfg(
        base_overrides(_server, base)
        + ["run_name=qa", f"dataset_file={ds}", "sandbox.local.isolation=none", f"samples_per_prompt={K}",
           "+scorer@scorers.answer=match"]
    )  # fmt: skip
    code, stats = run_inprocess(cfg, base / "qa")
    assert stats["prompts"]["ok"] == 4 and stats["prompts"]["failed"] == 2, stats["prompts"]
    assert export_main([str(base / "qa"), "--to", "inspect"]) == 0
    return base / "qa" / "export" / "inspect" / "qa.eval"


def test_read_eval_log_reads_samples_scores_epochs_errors_and_usage(eval_file: Path) -> None:
    log = json.loads(run_consumer("inspect", READ, str(eval_file)).stdout)
    assert (log["status"], log["task"], log["model"], log["dataset"]) == ("success", "qa", "local-model", "qa")
    assert log["epochs"] == K and log["samples_in_dataset"] == 3
    samples = log["samples"]
    assert len(samples) == 3 * K and (log["total"], log["completed"]) == (6, 4)
    assert sorted((s["id"], s["epoch"]) for s in samples) == sorted({(s["id"], e) for s in samples for e in (1, 2)})
    right, wrong, failed = ([s for s in samples if s["input"].startswith(f"{t}\n")] for t in "abc")
    assert len(right) == len(wrong) == len(failed) == K
    for s in right:  # system, user, two parallel calls, their two results, the answer
        assert s["roles"] == ["system", "user", "assistant", "tool", "tool", "assistant"]
        assert s["calls"] == [["terminal", "terminal"]] and s["tool_results"] == ["terminal", "terminal"]
        assert s["reasoning"] == ["both", "ok"] and s["disposition"] == "kept"
        assert s["scores"] == {"answer": {"value": 1.0, "explanation": "target found in the answer"}}
    for s in wrong:
        assert s["scores"] == {"answer": {"value": 0.0, "explanation": "target not found in the answer"}}
    for s in failed:
        assert s["error"] == "ModelCallError: HTTP 400: Error code: 400 - context length exceeded"
        assert s["scores"] == {} and s["disposition"] == "failed" and s["roles"] == ["user"]
    assert log["results"] == {"answer": {"mean": 0.5, "accuracy": 0.5, "stderr": pytest.approx(0.288675, abs=1e-6)}}
    per_sample = sum(t for s in samples for t in s["usage"].values())
    assert per_sample > 0 and log["usage"]["local-model"]["total_tokens"] == per_sample


def test_every_outcome_of_the_varied_sample_run_reads(_server: ScriptedServer, tmp_path: Path) -> None:
    """Partial, stopped, discarded (no reasoning, an unknown tool), invalid arguments, failed: all valid samples."""
    _server.reset()
    run = make_run(_server, tmp_path)
    assert export_main([str(run), "--to", "inspect"]) == 0
    log = json.loads(run_consumer("inspect", READ, str(run / "export" / "inspect" / "run.eval")).stdout)
    prompts = json.loads((run / "statistics.json").read_text())["prompts"]
    seen = Counter(s["disposition"] for s in log["samples"])
    assert seen == {"kept": prompts["ok"], "discarded": prompts["discarded"], "failed": prompts["failed"]}
    assert sum(1 for s in log["samples"] if s["error"]) == prompts["failed"] and log["total"] == prompts["total"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def viewer(eval_file: Path, tmp_path: Path) -> Iterator[str]:
    """`inspect view` of the log's directory; its URL once it lists the log."""
    port = free_port()
    inspect = consumer_python("inspect").parent / "inspect"
    cmd = [str(inspect), "view", "--log-dir", str(eval_file.parent), "--port", str(port)]
    out = tmp_path / "inspect-view.log"
    with out.open("w") as log:  # (the child has its own copy of the descriptor)
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def lists_the_log() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/api/log-files", timeout=5) as r:
                return eval_file.name in r.read().decode()
        except (urllib.error.URLError, OSError):
            return False

    try:
        wait_for(
            lists_the_log, 60, "inspect view to list the log", gone=exited(proc), state=out.read_text, interval=0.2
        )
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def click(driver: webdriver.Chrome, *texts: str) -> None:
    """Click the first element whose text is one of `texts`, again while the viewer re-renders it under us."""
    match = " or ".join(f"normalize-space(text())='{t}'" for t in texts)

    def clicked() -> bool:
        try:
            driver.find_element(By.XPATH, f"//*[{match}]").click()
        except (NoSuchElementException, StaleElementReferenceException):
            return False
        return True

    wait_for(clicked, 30, f"an element {texts[0]!r} to click")


def test_inspect_view_shows_the_samples_and_a_score_in_chromium(
    viewer: str,
    browser: webdriver.Chrome,  # noqa: F811
) -> None:
    def page() -> str:
        return browser.find_element(By.TAG_NAME, "body").text

    browser.get(viewer)  # the log list opens the only log's samples
    wait_for(lambda: f"{3 * K} Samples" in page(), 60, f"the list of {3 * K} samples", state=lambda: page()[-300:])
    text = page()
    assert re.search(r"MEAN\s*\(4/6\)\s*0\.5\b", text), text[:400]  # the scorer's metric over the scored samples
    assert "ModelCallError: HTTP 400" in text and "3 x 2 samples" in text  # the failed prompt; rows x epochs
    click(browser, "It is 42.")  # a sample of the right row
    wait_for(lambda: "/samples/sample/" in browser.current_url and "SCORING" in page(), 30, "the sample's page")
    assert "echo 42" in page() and "echo hi" in page()  # its two parallel tool calls
    browser.find_element(
        By.XPATH, "//*[normalize-space(text())='Scoring' or normalize-space(text())='SCORING']"
    ).click()
    wait_for(lambda: "target found in the answer" in page(), 30, "the score's explanation", state=lambda: page()[-400:])
