"""Provenance hashes: one value per input in every process, a new value when any input changes."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_runner import __version__
from hermes_runner.rundir.reader import RunData
from hermes_runner.rundir.stats import RunStats
from hermes_runner.trajectory.hermes import system_turn
from hermes_runner.trajectory.provenance import PROVENANCE_KEYS, Provenance, digest

TOOL = {"type": "function", "function": {"name": "terminal", "description": "Run a command.", "parameters": {}}}
CONFIG = {
    "model": {"name": "m", "temperature": 0.7, "tool_choice": None, "extra_body": {}},
    "max_tokens": 256,
    "reasoning": {"enabled": True, "effort": None},
    "dataset": {"prompt_template": "Solve: {{ prompt }}"},
    "scorers": {"answer": {"kind": "match", "primary": True}},
    "filters": {"require_reasoning": True, "min_reward": 1.0},
}


def entry(system: str = "Be brief.", tools: list[dict] | None = None, model: str = "m") -> dict:
    turns = [{"from": "system", "value": system_turn([TOOL] if tools is None else tools, system)}]
    turns.append({"from": "human", "value": "Solve: 2+2"})
    return {"conversations": turns, "metadata": {"model": model}, "discard_reason": ""}


def provenance(tmp_path: Path, e: dict, config: dict | None = None, rec: dict | None = None, code: str = "") -> dict:
    """The provenance of `e` in a run dir whose invocation 0 had `config` (None: no invocations.jsonl) and the
    python scorer code `code`."""
    d = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    d.mkdir()
    if config is not None:
        line = {"invocation": 0, "version": __version__, "config": config, "scorer_code": {"answer": code}}
        (d / "invocations.jsonl").write_text(json.dumps(line) + "\n")
    run = RunData(dir=d, name="r", manifest={}, statistics=None, invocations=[], stats=RunStats())
    return Provenance(run).of(rec or {"key": "0", "inv": 0, "status": "ok", "model": e["metadata"]["model"]}, e)


def test_digest_is_the_sha256_of_canonical_json_in_every_process() -> None:
    value = {"b": [1, 2.5, None], "a": "é"}
    assert digest(value) == hashlib.sha256('{"a":"é","b":[1,2.5,null]}'.encode()).hexdigest()
    assert digest("Be brief.") == hashlib.sha256(b"Be brief.").hexdigest()
    code = "from hermes_runner.trajectory.provenance import digest; print(digest({'b': [1, 2.5, None], 'a': 'é'}))"
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )  # fmt: skip
    assert other.stdout.strip() == digest(value)


def test_every_field_and_its_table(tmp_path: Path) -> None:
    p = provenance(tmp_path, entry(), CONFIG)
    assert set(p) == set(PROVENANCE_KEYS) and None not in p.values()
    assert (p["model"], p["disposition"], p["runner_version"]) == ("m", "kept", __version__)
    assert p["system_prompt"] == digest("Be brief.")
    assert p["prompt_template"] == digest("Solve: {{ prompt }}")
    assert p["tools"] == digest([TOOL])
    assert p["filters"] == digest(CONFIG["filters"])


def _changed(path: str, value: object) -> dict:
    conf = copy.deepcopy(CONFIG)
    node = conf
    *parents, last = path.split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    return conf


CHANGES = {
    "system_prompt": (entry(system="Be thorough."), CONFIG),
    # (another name: hermes.system_turn caches a listing by its tools' names, as a run offers one schema per name)
    "tools": (entry(tools=[{**TOOL, "function": {**TOOL["function"], "name": "shell"}}]), CONFIG),
    "model": (entry(model="other"), CONFIG),
    "prompt_template": (entry(), _changed("dataset.prompt_template", "Answer: {{ prompt }}")),
    "sampling": (entry(), _changed("model.temperature", 0.2)),
    "scorers": (entry(), _changed("scorers.answer.kind", "judge")),
    "filters": (entry(), _changed("filters.min_reward", 0.5)),
}


@pytest.mark.parametrize("field", CHANGES)
def test_each_input_changes_its_own_field_only(tmp_path: Path, field: str) -> None:
    base = provenance(tmp_path, entry(), CONFIG)
    e, conf = CHANGES[field]
    changed = provenance(tmp_path, e, conf)
    assert [k for k in PROVENANCE_KEYS if base[k] != changed[k]] == [field]


def test_a_python_scorers_code_is_part_of_its_hash(tmp_path: Path) -> None:
    one, other = (provenance(tmp_path, entry(), CONFIG, code=c) for c in ("a" * 64, "b" * 64))
    assert [k for k in PROVENANCE_KEYS if one[k] != other[k]] == ["scorers"]


def test_a_session_without_tools_has_its_system_prompt(tmp_path: Path) -> None:
    p = provenance(tmp_path, entry(tools=[]), CONFIG)
    assert (p["system_prompt"], p["tools"]) == (digest("Be brief."), digest([]))


def test_a_discarded_row_says_why(tmp_path: Path) -> None:
    rec = {"key": "0", "inv": 0, "status": "discarded", "reason": "low_reward", "model": "m"}
    assert provenance(tmp_path, entry(), CONFIG, rec)["disposition"] == "discarded: low_reward"


def test_a_run_dir_without_records_gives_nulls(tmp_path: Path) -> None:
    """An older run dir (no invocations.jsonl, no run.json) and a row of another runner (no Hermes system turn)."""
    e = {"conversations": [{"from": "human", "value": "hi"}], "metadata": {}}
    p = provenance(tmp_path, e, None, {"key": "0", "status": "ok"})
    assert p == {k: None for k in PROVENANCE_KEYS} | {"disposition": "kept"}
