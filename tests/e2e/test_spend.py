"""Spend control: cost accounting, run budgets, per-prompt limits, rate limits, dry run."""

from __future__ import annotations

import logging
import time

import pytest

from hermes_runner.testing.scripted_server import turn_of

from tests.helpers.run import read_jsonl, run_inprocess, script, write_jsonl

TERM = {"name": "terminal", "arguments": {"command": "echo hi"}}


def costly(i: int, cost: float = 0.01) -> str:
    return script({"tool_calls": [TERM], "reasoning": "r", "cost": cost},
                  {"content": "done", "reasoning": "r", "cost": cost}, text=f"task {i}")  # fmt: skip


def test_cost_from_provider_else_price_table(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": costly(0, 0.005)}])
    _, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert stats["usage"]["cost_usd"] == pytest.approx(0.01)
    ds2 = write_jsonl(tmp_path / "d2.jsonl", [{"prompt": "priced"}])
    price = ["model.price.prompt_per_mtok=1000", "model.price.completion_per_mtok=2000"]
    _, stats = run_inprocess(make_cfg(*price, dataset=ds2), tmp_path / "r2")
    u = stats["usage"]
    assert u["cost_usd"] == pytest.approx((u["prompt_tokens"] * 1000 + u["completion_tokens"] * 2000) / 1e6)
    entry = read_jsonl(tmp_path / "r2" / "trajectories.jsonl")[0]
    assert entry["usage"]["cost_usd"] == pytest.approx(u["cost_usd"])


def test_run_budget_stops_dispatch_and_a_higher_budget_continues(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": costly(i)} for i in range(20)])
    code, stats = run_inprocess(make_cfg("num_workers=2", "limits.max_cost_usd=0.1", dataset=ds), run_dir)
    assert code == 3 and stats["stopped_by_budget"].startswith("limits.max_cost_usd=0.1")
    started = {r.prompt for r in server.requests if r.turn == 0}
    # 0.1 buys five prompts of $0.02; the two in flight when it ran out may finish, nothing else starts.
    assert 5 <= len(started) <= 7 and stats["prompts"]["ok"] == len(started)
    assert stats["usage"]["cost_usd"] <= 0.1 + 2 * 0.02 + 1e-9
    code, stats = run_inprocess(make_cfg("num_workers=2", "limits.max_cost_usd=0.1", dataset=ds), run_dir)
    assert code == 3 and len({r.prompt for r in server.requests if r.turn == 0}) == len(started)  # nothing new
    code, stats = run_inprocess(make_cfg("num_workers=2", "limits.max_cost_usd=1.0", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 20
    assert stats["usage"]["cost_usd"] == pytest.approx(0.4) and stats["stopped_by_budget"] is None


def test_token_budget(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(30)])
    code, stats = run_inprocess(make_cfg("num_workers=1", "limits.max_tokens_total=1000", dataset=ds), run_dir)
    assert code == 3 and 0 < stats["prompts"]["ok"] < 30
    assert stats["usage"]["total_tokens"] >= 1000


def test_per_prompt_token_and_cost_limits_end_the_conversation(make_cfg, tmp_path, run_dir, server):
    loop = script(*[{"tool_calls": [TERM], "reasoning": "r", "cost": 0.01}] * 10)
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": loop}])
    _, _ = run_inprocess(make_cfg("limits.prompt_max_cost_usd=0.025", dataset=ds), run_dir)
    entry = read_jsonl(run_dir / "trajectories.jsonl")[0]
    assert entry["api_calls"] == 3 and entry["partial"] and not entry["completed"]
    assert read_jsonl(run_dir / "ledger.jsonl")[0]["stop"] == "cost_limit"
    _, _ = run_inprocess(make_cfg("limits.prompt_max_tokens=1", dataset=ds), tmp_path / "r2")
    assert read_jsonl(tmp_path / "r2" / "ledger.jsonl")[0]["stop"] == "token_limit"


def test_prompt_timeout_on_a_hung_response(make_cfg, tmp_path, run_dir, server):
    """The hung prompt is stopped at its limit and kept (stop_reason timeout) with the spend of its first call."""
    hung = script({"tool_calls": [TERM], "reasoning": "r"}, {"content": "late", "sleep": 60}, text="hung")
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": hung}, {"prompt": "fine"}])
    t0 = time.monotonic()
    code, stats = run_inprocess(make_cfg("limits.timeout_s=5", dataset=ds), run_dir)  # "fine" gets 5 s, under load
    assert time.monotonic() - t0 < 20  # not the 60 s of the hung reply
    assert code == 0 and stats["prompts"]["ok"] == 2 and stats["stop_reasons"] == {"final_answer": 1, "timeout": 1}
    rec = next(r for r in read_jsonl(run_dir / "ledger.jsonl") if r["stop"] == "timeout")
    assert rec["api_calls"] == 1 and rec["usage"]["total_tokens"] > 0 and rec["at_limit"] == "scored"
    assert not any((tmp_path / "sandboxes").rglob("work")), "the timed-out prompt's sandbox was left behind"


def test_429_storm_backs_off_the_whole_run_and_adapts_concurrency(make_cfg, tmp_path, run_dir, server, caplog):
    caplog.set_level("DEBUG")  # (each concurrency change is a DEBUG line; INFO has a periodic summary)
    step = {"fail": [{"status": 429, "retry_after": 1}], "content": "ok", "reasoning": "r"}
    # Four sessions hit the 429s; the four others are mid-conversation and must wait out Retry-After too.
    rows = [{"prompt": script(step, text=f"storm {i}") if i < 4 else f"calm {i}"} for i in range(32)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    server.latency = 0.05
    code, stats = run_inprocess(make_cfg("num_workers=8", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 32
    first_429 = min(r.at for r in server.requests if "#script" in r.prompt)
    calm_second_calls = [r.at for r in server.requests if r.prompt.startswith("calm") and r.turn == 1]
    assert calm_second_calls and min(calm_second_calls) >= first_429 + 0.95
    assert not [r for r in server.requests if first_429 + 0.06 < r.at < first_429 + 0.95]
    assert "concurrency 8 -> 6" in caplog.text
    assert not [r for r in caplog.records if "concurrency 8 -> 6" in r.getMessage() and r.levelno > logging.DEBUG]
    assert stats["retries"] == 4
    inv = stats["invocation"]
    assert inv["retries"] == 4 and inv["rate_limited"] == 4 and 0.9 <= inv["backoff_seconds"] <= 4.5


def test_request_rate_limit_is_never_exceeded(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(8)])
    run_inprocess(make_cfg("num_workers=8", "model.rate_limit.requests_per_minute=180", dataset=ds), run_dir)
    times = sorted(r.at for r in server.requests)
    assert len(times) == 16
    # 180/min = 3/s with a burst of one second's worth: any 2 s window holds at most 3 + 6 calls
    # (one more for arrival jitter at the server), and the calls after the burst come at <= 3/s.
    assert max(sum(1 for t in times if s <= t < s + 2.0) for s in times) <= 10
    assert (len(times) - 3) / (times[-1] - times[0]) <= 3.3


def test_dry_run_validates_probes_once_and_estimates(make_cfg, tmp_path, run_dir, server, capsys, caplog):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "x" * 400} for _ in range(10)])
    server.models = ["local-model", "other"]
    price = ["model.price.prompt_per_mtok=3", "model.price.completion_per_mtok=15"]
    code, _ = run_inprocess(make_cfg("dry_run=true", "max_turns=5", *price, dataset=ds), run_dir)
    out = capsys.readouterr().out
    assert code == 0 and server.requests == []  # the probe lists models; no chat call
    assert "10 prompts, 10-50 model calls" in out and "cost from the price table: $" in out
    assert "model 'local-model' listed" in out
    assert not (run_dir / "run.json").exists()  # a dry run does not start the run
    server.models = ["something-else"]
    code, _ = run_inprocess(make_cfg("dry_run=true", dataset=ds), run_dir)
    assert code == 2 and "does not list the model 'local-model'" in caplog.text
    code, _ = run_inprocess(make_cfg("dry_run=true", "model.base_url=http://127.0.0.1:9/v1", dataset=ds), run_dir)
    assert (
        code == 2 and "cannot reach the endpoint" in caplog.text and "connection refused (is the server" in caplog.text
    )


MAIN_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
TOOL_USAGE = {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150}


def moa_agent(body: dict, srv):
    """The run's model calls mixture_of_agents once, then answers; the MoA models answer with their own usage."""
    if body.get("model") != "local-model":
        return srv.completion(body, {"content": "42", "usage": TOOL_USAGE})
    if turn_of(body) == 0:
        call = {"name": "mixture_of_agents", "arguments": {"user_prompt": "What is 6 x 7?"}}
        return srv.completion(body, {"tool_calls": [call], "reasoning": "r", "usage": MAIN_USAGE})
    return srv.completion(body, {"content": "42", "reasoning": "r", "usage": MAIN_USAGE})


MOA = [
    "distribution=default",
    "tools.moa.reference_models=[{model:ref-a},{model:ref-b}]",
    "tools.moa.aggregator.model=agg",
]


def test_tool_models_spend_counts_in_the_prompt_and_the_run(make_cfg, tmp_path, run_dir, server):
    server.handler = moa_agent
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(3)])
    code, stats = run_inprocess(make_cfg(*MOA, "num_workers=1", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 3
    per_prompt = 2 * MAIN_USAGE["total_tokens"] + 3 * TOOL_USAGE["total_tokens"]  # two references + aggregator
    for entry in read_jsonl(run_dir / "trajectories.jsonl"):
        assert entry["tool_stats"]["mixture_of_agents"]["success"] == 1
        assert entry["usage"]["total_tokens"] == per_prompt
    assert stats["usage"]["total_tokens"] == 3 * per_prompt

    # The run's token budget sees the tool models' calls: one prompt spends past it, no other starts.
    seen = len(server.requests)
    budget = f"limits.max_tokens_total={per_prompt - 100}"
    code, stats = run_inprocess(make_cfg(*MOA, "num_workers=1", budget, dataset=ds), tmp_path / "r2")
    assert code == 3 and stats["prompts"]["ok"] == 1 and stats["usage"]["total_tokens"] == per_prompt
    assert len({r.prompt for r in server.requests[seen:] if r.body.get("model") == "local-model"}) == 1
