"""A small run directory written with the package's own code and no model, sandbox or Hydra: the entries by
trajectory/entry, the ledger records by run/record, the files by rundir/store. For unit tests of the read side
(report, export, the commands): one completed prompt with a tool call, one discarded (no reasoning), one failed.
"""

from __future__ import annotations

import json
from pathlib import Path

from hermes_runner.agent.loop import SessionResult, StopReason
from hermes_runner.agent.session import Failure
from hermes_runner.config.root import RunConfig
from hermes_runner.run.record import _summary, classify
from hermes_runner.rundir.store import RunStore, atomic_write_json, dumps_line
from hermes_runner.tools.catalog import tool_names
from hermes_runner.trajectory import entry as entries

from tests.helpers.inprocess import prompt, result, run_cfg

CALL = {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": json.dumps({"command": "ls"})}}


def completed(text: str = "list the files", index: int = 0) -> SessionResult:
    """A conversation that called `terminal` once and then answered, with reasoning on both turns."""
    res = result(text)
    res.prompt = prompt(text, index)
    res.history = [
        {"role": "user", "content": text},
        {"role": "assistant", "content": "", "reasoning": "look first", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "name": "terminal", "content": '{"output": "a.txt", "exit_code": 0}'},
        {"role": "assistant", "content": "There is a.txt.", "reasoning": "seen it"},
    ]
    res.stop_reason, res.api_calls, res.tool_calls, res.duration_s = (
        StopReason.final_answer,
        2,
        [("terminal", True)],
        1.5,
    )
    return res


def unreasoned(text: str = "answer plainly", index: int = 1) -> SessionResult:
    """A conversation without reasoning: discarded by the default filters."""
    res = result(text)
    res.prompt = prompt(text, index)
    res.history = [{"role": "user", "content": text}, {"role": "assistant", "content": "A plain answer."}]
    res.stop_reason, res.api_calls = StopReason.final_answer, 1
    return res


def write(run_dir: Path, cfg: RunConfig | None = None) -> Path:
    """`run_dir` with the three prompts recorded as a run records them (ledger, batch, discarded, failures)."""
    cfg = cfg or run_cfg(run_dir / "sandbox")
    store = RunStore(run_dir)
    store.lock()
    names = tool_names()
    for res in (completed(), unreasoned()):
        status, reason, summary = classify(res, cfg.filters, names)
        e = entries.entry(res, batch_num=0, model="m", tool_names=names, system_prompt="", discard_reason=reason or "")
        rec = {
            **_summary(res, res.prompt.key, res.prompt.index, 0),
            **summary,
            **({"reason": reason} if reason else {}),
        }
        store.write_trajectory(status, 0, dumps_line(e), rec)
    failure = Failure(prompt("time out", 2), "PromptTimeout", "the prompt took longer than 5s", traceback="Traceback")
    rec = {**_summary(failure, failure.prompt.key, 2, 0), "error_type": failure.error_type, "error": failure.error}
    store.write_failure(rec, {"prompt": failure.prompt.prompt, "traceback": failure.traceback})
    store.close()
    store.unlock()
    atomic_write_json(run_dir / "run.json", {"run_name": run_dir.name, "data_config": {}})
    return run_dir
