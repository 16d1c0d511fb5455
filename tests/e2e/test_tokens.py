"""output.tokens=true against the scripted server's vLLM-style token ids (a byte tokenizer of a ChatML prompt):
the tokens/ sidecar, the prefix-consistency check and the tokens export with loss masks."""

from __future__ import annotations

import pytest

from hermes_runner.commands.export import main as export_main
from hermes_runner.errors import ConfigError
from hermes_runner.testing.script import END_ID, LOGPROB

from tests.helpers.run import read_jsonl, run_inprocess, script, write_jsonl

TERM = {"name": "terminal", "arguments": {"command": "echo hi"}}
FINAL = {"content": "final answer"}
# A <think> block in the content: the client keeps it as reasoning, so the history sent back lacks it (drift).
THINK = {"tool_calls": [TERM], "content": "ok", "reasoning": "plan", "reasoning_field": "think"}


@pytest.fixture
def tokens_run(make_cfg, tmp_path, run_dir):
    rows = [{"prompt": script({"tool_calls": [TERM]}, FINAL, text="a")}, {"prompt": script(THINK, FINAL, text="b")}]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = make_cfg("output.tokens=true", "distribution=terminal_only", "filters.require_reasoning=false", dataset=ds)
    assert run_inprocess(cfg, run_dir)[0] == 0
    return run_dir


def test_every_turn_keeps_its_token_ids_and_a_drifting_row_is_flagged(tokens_run, server):
    assert all(c.body["return_token_ids"] and c.body["logprobs"] for c in server.calls_for("a"))
    sidecar = {r["key"]: r for r in read_jsonl(tokens_run / "tokens" / "turns.jsonl")}
    assert len(sidecar) == 2 and all(len(r["turns"]) == 2 for r in sidecar.values())
    by_drift = sorted(sidecar.values(), key=lambda r: r["drift"])
    assert [r["drift"] for r in by_drift] == [[], [1]]  # the <think> row's second prompt lacks what was sampled
    first = by_drift[0]["turns"][0]
    assert first["finish"] == "tool_calls" and first["completion_ids"][-1] == END_ID
    assert (
        bytes(first["completion_ids"][:-1]).decode()
        == '{"name": "terminal", "arguments": "{\\"command\\": \\"echo hi\\"}"}'
    )
    assert first["logprobs"] == [LOGPROB] * len(first["completion_ids"])
    assert "completion_ids" not in (tokens_run / "batch_0.jsonl").read_text()  # not in the ShareGPT file


def test_the_tokens_export_masks_or_drops_the_drifting_row(tokens_run, tmp_path):
    assert export_main([str(tokens_run), "--to", "tokens", "--out", str(tmp_path / "m")]) == 0
    rows = sorted(read_jsonl(tmp_path / "m" / "trajectories.tokens.jsonl"), key=lambda r: r["drift"])
    good, bad = rows
    learned = bytes(t for t, m in zip(good["input_ids"], good["loss_mask"], strict=True) if m and t < 256).decode()
    assert learned.startswith('{"name": "terminal"') and learned.endswith("final answer")
    assert (
        good["labels"][-1] == END_ID
        and good["masked_turns"] == []
        and len(good["attention_mask"]) == len(good["input_ids"])
    )
    assert bad["masked_turns"] == [0] and sum(bad["loss_mask"]) == len(FINAL["content"]) + 1  # the last turn only
    assert export_main([str(tokens_run), "--to", "tokens", "--drift", "drop", "--out", str(tmp_path / "d")]) == 0
    assert [r["drift"] for r in read_jsonl(tmp_path / "d" / "trajectories.tokens.jsonl")] == [[]]


def test_without_output_tokens_nothing_is_asked_or_kept(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": script(FINAL, text="plain")}])
    assert run_inprocess(make_cfg("filters.require_reasoning=false", dataset=ds), run_dir)[0] == 0
    assert not (run_dir / "tokens").exists()
    assert [c.body.get("return_token_ids") for c in server.calls_for("plain")] == [None]
    assert export_main([str(run_dir), "--to", "tokens", "--out", str(tmp_path / "x")]) != 0  # refused, said why


def test_output_tokens_with_a_stream_is_refused(make_cfg):
    from hermes_runner.config import check

    with pytest.raises(ConfigError, match="output.tokens needs model.stream=false"):
        check(make_cfg("output.tokens=true", "model.stream=true"))
