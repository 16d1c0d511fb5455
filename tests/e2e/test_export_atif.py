"""`--to atif` on a real run (scripted endpoint): every file loaded by Harbor's own ATIF models and validator
(harbor from PyPI in its consumer venv, tests/consumers/harbor.txt), over parallel calls, a max_turns stop, a
discard, a failure, k samples and a MoA tool call whose models ran (an embedded subagent trajectory)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_runner.commands.export import main
from hermes_runner.testing.scripted_server import ScriptedServer

from tests.helpers.consumers import run_consumer
from tests.helpers.run import base_overrides, compose_cfg, read_jsonl, run_inprocess, script, write_jsonl

# Harbor reads every file of the export: its validator (the CLI's checks) and its pydantic models, then the
# facts a viewer shows of each, as the models give them back.
HARBOR_READS = r"""
import json, sys
from pathlib import Path
from harbor.models.trajectories import Trajectory
from harbor.utils.trajectory_validator import TrajectoryValidator

out = {}
for path in sorted(Path(sys.argv[1]).glob("*.json")):
    validator = TrajectoryValidator()
    if not validator.validate(path):
        sys.exit(f"{path.name}: {validator.get_errors()}")
    t = Trajectory.model_validate_json(path.read_text())
    subs = {s.trajectory_id: s for s in t.subagent_trajectories or []}
    refs = [r for s in t.steps if s.observation for o in s.observation.results for r in o.subagent_trajectory_ref or []]
    assert all(r.trajectory_id in subs for r in refs), "a subagent ref that does not resolve"
    out[path.name] = {
        "agent": [t.agent.name, t.agent.model_name, len(t.agent.tool_definitions or [])],
        "sources": [s.source for s in t.steps],
        "calls": [[c.function_name for c in s.tool_calls or []] for s in t.steps],
        "results": [[r.source_call_id for r in s.observation.results] if s.observation else [] for s in t.steps],
        "call_ids": [[c.tool_call_id for c in s.tool_calls or []] for s in t.steps],
        "reasoning": [s.reasoning_content for s in t.steps],
        "step_prompt_tokens": [s.metrics.prompt_tokens for s in t.steps if s.metrics],
        "final": t.final_metrics.model_dump(exclude_none=True),
        "extra": {k: t.extra[k] for k in ("disposition", "stop_reason", "completed", "metadata")},
        "subagents": [[s.agent.model_name, [x.message for x in s.steps]] for s in subs.values()],
    }
print(json.dumps(out))
"""

MOA_QUESTION = "What is 6 x 7?\n" + "#script " + json.dumps([{"content": "42"}])  # the MoA models' own script


def _call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


PROMPTS = {
    "parallel": script(
        {
            "reasoning": "Both at once.",
            "tool_calls": [_call("write_file", path="a.txt", content="x"), _call("terminal", command="ls")],
        },  # fmt: skip
        {"reasoning": "Done.", "content": "a.txt is there."},
        text="parallel",
    ),
    "loop": script(*[{"reasoning": "Again.", "tool_calls": [_call("terminal", command="echo loop")]}] * 5, text="loop"),
    "bare": script({"content": "No thinking."}, text="bare"),  # discarded: no reasoning
    "fails": script({"fail": [{"status": 400, "message": "context length exceeded"}] * 2}, text="fails"),  # k = 2
    "moa": script(
        {"reasoning": "Ask the panel.", "tool_calls": [_call("mixture_of_agents", user_prompt=MOA_QUESTION)]},
        {"reasoning": "They agree.", "content": "42"},
        text="moa",
    ),
}


@pytest.fixture(scope="module")
def run(_server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    _server.reset()
    base = tmp_path_factory.mktemp("atif")
    ds = write_jsonl(base / "d.jsonl", [{"prompt": p, "kind": k} for k, p in PROMPTS.items()])
    cfg = compose_cfg(
        base_overrides(_server, base)
        + [f"dataset_file={ds}", "run_name=atif", "samples_per_prompt=2", "max_turns=3"]
        + ["sandbox.local.isolation=none", "distribution=terminal_only", "+distribution.toolsets.moa=100"]
        + ["tools.moa.reference_models=[{model:ref-a},{model:ref-b}]", "tools.moa.aggregator.model=agg"]
    )
    code, stats = run_inprocess(cfg, base / "run")
    assert code == 1 and stats is not None and stats["prompts"]["failed"] == 2  # the "fails" row, both samples
    return base / "run"


def test_every_atif_file_loads_with_harbor(run: Path, capsys: pytest.CaptureFixture):
    assert main([str(run), "--to", "atif", "--discarded"]) == 0
    out = run / "export" / "atif"
    assert capsys.readouterr().out.strip() == f"{out}: 6 kept, 2 discarded"
    index = read_jsonl(out / "index.jsonl")
    assert len(index) == 10 and sorted(p.name for p in out.glob("*.json")) == sorted(i["file"] for i in index if i["file"])  # fmt: skip
    failed = [i for i in index if i["status"] == "failed"]
    assert len(failed) == 2 and {i["file"] for i in failed} == {None} and "context length" in failed[0]["error"]
    assert sorted(i["sample_index"] for i in failed) == [0, 1]

    read = json.loads(run_consumer("harbor", HARBOR_READS, str(out)).stdout)
    assert len(read) == 8
    by_kind: dict[str, list[dict]] = {}
    for t in read.values():
        by_kind.setdefault(json.loads(t["extra"]["metadata"]["row_fields"])["kind"], []).append(t)
    assert {k: len(v) for k, v in by_kind.items()} == {"parallel": 2, "loop": 2, "bare": 2, "moa": 2}  # k = 2
    for kind, (t0, t1) in by_kind.items():
        assert {t0["extra"]["metadata"]["sample_index"], t1["extra"]["metadata"]["sample_index"]} == {0, 1}, kind
        assert t0["agent"][:2] == ["hermes-runner", "local-model"] and t0["agent"][2] >= 3  # terminal, file, moa
        assert t0["extra"]["disposition"] == ("discarded" if kind == "bare" else "kept")

    par = by_kind["parallel"][0]  # two calls in one agent step, each answered by id
    assert par["sources"] == ["system", "user", "agent", "agent"] and par["calls"][2] == ["write_file", "terminal"]
    assert par["results"][2] == par["call_ids"][2] and len(set(par["call_ids"][2])) == 2
    assert par["reasoning"] == [None, None, "Both at once.", "Done."]
    assert sum(par["step_prompt_tokens"]) == par["final"]["total_prompt_tokens"] > 0  # no tool ran a model
    assert par["final"]["total_steps"] == 4

    loop = by_kind["loop"][0]  # three turns of calls, then the final summary (no tools)
    assert (loop["extra"]["stop_reason"], loop["extra"]["completed"]) == ("max_turns", False)
    assert loop["calls"] == [[], [], ["terminal"], ["terminal"], ["terminal"], []]
    assert len(loop["step_prompt_tokens"]) == 4

    moa = by_kind["moa"][0]  # the MoA call: an embedded subagent, its aggregator's answer
    assert moa["calls"][2] == ["mixture_of_agents"] and moa["subagents"] == [["agg", [MOA_QUESTION, "42"]]]
    assert moa["final"]["total_prompt_tokens"] > sum(moa["step_prompt_tokens"])  # the panel's tokens too

    # Re-exported without the discards: their files go, the index says what is there.
    assert main([str(run), "--to", "atif"]) == 0
    assert len(list(out.glob("*.json"))) == 6 and len(read_jsonl(out / "index.jsonl")) == 8
