"""The agent loop against the scripted endpoint: reasoning, tool calls, retries, limits, requests."""

from __future__ import annotations

import json
import socket
import time

import pytest
from aiohttp import web

from tests.helpers.run import read_jsonl, run_inprocess, script, write_jsonl

TERM = {"name": "terminal", "arguments": {"command": "echo hi"}}
FINAL = {"content": "final answer", "reasoning": "wrap up"}


def run_one(make_cfg, tmp_path, run_dir, prompt: str, *overrides: str) -> tuple[dict | None, dict]:
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": prompt}])
    _, stats = run_inprocess(make_cfg(*overrides, dataset=ds), run_dir)
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    return (entries[0] if entries else None), stats


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content", "reasoning_details", "think", "scratchpad"])
def test_reasoning_is_captured_from_every_field_style(make_cfg, tmp_path, run_dir, server, field):
    steps = [
        {"tool_calls": [TERM], "reasoning": "plan: run echo", "reasoning_field": field},
        {"content": "the end", "reasoning": "it printed hi", "reasoning_field": field},
    ]
    entry, stats = run_one(make_cfg, tmp_path, run_dir, script(*steps))
    gpt = [t for t in entry["conversations"] if t["from"] == "gpt"]
    assert gpt[0]["value"].startswith("<think>\nplan: run echo\n</think>\n<tool_call>")
    assert gpt[1]["value"] == "<think>\nit printed hi\n</think>\nthe end"
    assert "<REASONING_SCRATCHPAD>" not in json.dumps(entry)
    assert stats["reasoning_statistics"]["coverage_percent"] == 100.0


def test_tool_calls_and_responses_are_matched_by_id(make_cfg, tmp_path, run_dir, server):
    two = [
        {"id": "A", "name": "write_file", "arguments": {"path": "f.txt", "content": "data"}},
        {"id": "B", "name": "terminal", "arguments": {"command": "cat f.txt"}},
    ]
    entry, _ = run_one(make_cfg, tmp_path, run_dir, script({"tool_calls": two, "reasoning": "r"}, FINAL))
    turns = entry["conversations"]
    assert [t["from"] for t in turns] == ["system", "human", "gpt", "tool", "gpt"]
    assert "<tools>" in turns[0]["value"] and '"name": "write_file"' in turns[0]["value"]
    assert set(turns[2]) == {"from", "value"} and turns[2]["value"].count("<tool_call>") == 2  # calls once, in value
    blocks = [json.loads(b.split("</tool_response>")[0]) for b in turns[3]["value"].split("<tool_response>\n")[1:]]
    assert [(b["tool_call_id"], b["name"]) for b in blocks] == [("A", "write_file"), ("B", "terminal")]
    assert blocks[1]["content"]["output"] == "data"  # the file really was written in the sandbox
    assert entry["tool_stats"]["write_file"] == {"count": 1, "success": 1, "failure": 0}


def test_unknown_tool_and_bad_json_get_errors_back_and_count_as_failures(make_cfg, tmp_path, run_dir, server):
    steps = [
        {"tool_calls": [{"name": "teleport", "arguments": {}}], "reasoning": "r"},
        {"tool_calls": [{"name": "terminal", "arguments": "{not json"}], "reasoning": "r"},
        FINAL,
    ]
    prompt = script(*steps)
    entry, stats = run_one(make_cfg, tmp_path, run_dir, prompt, "filters.hallucinated_tools=keep")
    assert entry["completed"] and entry["api_calls"] == 3
    assert entry["tool_stats"]["terminal"] == {"count": 1, "success": 0, "failure": 1}
    assert "teleport" not in entry["tool_stats"]  # one schema for every row
    assert stats["unknown_tool_calls"] == {"teleport": 1}
    replies = [m for m in server.requests[-1].body["messages"] if m["role"] == "tool"]
    assert "not available" in replies[0]["content"] and "not valid JSON" in replies[1]["content"]


def test_hallucinated_tool_filter_drops_by_default(make_cfg, tmp_path, run_dir, server):
    steps = [{"tool_calls": [{"name": "teleport", "arguments": {}}], "reasoning": "r"}, FINAL]
    entry, stats = run_one(make_cfg, tmp_path, run_dir, script(*steps))
    assert entry is None and stats["discarded_by_reason"] == {"hallucinated_tool": 1}


def test_repeated_invalid_calls_stop_the_loop_as_partial(make_cfg, tmp_path, run_dir, server):
    bad = {"tool_calls": [{"name": "terminal", "arguments": "{"}], "reasoning": "r"}
    entry, _ = run_one(make_cfg, tmp_path, run_dir, script(*[bad] * 6), "max_invalid_tool_turns=3")
    assert entry["partial"] and not entry["completed"] and entry["api_calls"] == 3


def test_max_turns_bounds_the_loop(make_cfg, tmp_path, run_dir, server):
    entry, _ = run_one(
        make_cfg, tmp_path, run_dir, script(*[{"tool_calls": [TERM], "reasoning": "r"}] * 9), "max_turns=4"
    )
    # 4 turns, then one call without tools for a last answer: the row ends on an assistant turn
    assert entry["api_calls"] == 5 and not entry["completed"] and not entry["partial"]
    assert entry["stop_reason"] == "max_turns" and entry["conversations"][-1]["from"] == "gpt"
    assert "tools" not in server.requests[-1].body


def test_a_failed_final_summary_call_trims_instead_of_losing_the_row(make_cfg, tmp_path, run_dir, server):
    steps = [{"tool_calls": [TERM], "reasoning": "r"}] * 2 + [{"fail": [{"status": 400, "message": "too long"}]}]
    entry, stats = run_one(make_cfg, tmp_path, run_dir, script(*steps), "max_turns=2")
    assert stats["prompts"]["ok"] == 1 and entry["stop_reason"] == "max_turns" and entry["api_calls"] == 2
    assert [t["from"] for t in entry["conversations"]] == ["system", "human", "gpt", "tool", "gpt"]
    assert entry["conversations"][-1]["value"].count("<tool_call>") == 1  # its results trimmed, the call kept


def test_output_cut_by_length_is_partial(make_cfg, tmp_path, run_dir, server):
    entry, _ = run_one(
        make_cfg, tmp_path, run_dir, script({"content": "cut", "reasoning": "r", "finish_reason": "length"})
    )
    assert entry["partial"] and not entry["completed"]


def test_retries_honour_retry_after_and_other_4xx_fail_at_once(make_cfg, tmp_path, run_dir, server):
    flaky = script({"fail": [{"status": 429, "retry_after": 0.4}, {"status": 503}], **FINAL}, text="flaky")
    fatal = script({"fail": [{"status": 400, "message": "context length exceeded"}], **FINAL}, text="fatal")
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": flaky}, {"prompt": fatal}])
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    seen = server.calls_for("flaky")
    assert len(seen) == 3 and seen[1].at - seen[0].at >= 0.38
    assert len(server.calls_for("fatal")) == 1
    assert code == 1 and stats["failed_by_error"] == {"ModelCallError": 1} and stats["retries"] == 2
    fail = read_jsonl(run_dir / "failures.jsonl")[0]
    assert "400" in fail["error"] and "fatal" in fail["prompt"]


def test_retries_are_bounded(make_cfg, tmp_path, run_dir, server):
    always = script({"fail": [{"status": 500}] * 10, **FINAL})
    entry, stats = run_one(make_cfg, tmp_path, run_dir, always, "model.max_retries=2")
    assert entry is None and len(server.requests) == 3
    assert "after 2 retries" in read_jsonl(run_dir / "failures.jsonl")[0]["error"]


def test_usage_is_summed_per_trajectory(make_cfg, tmp_path, run_dir, server):
    u1 = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
          "completion_tokens_details": {"reasoning_tokens": 3}, "prompt_tokens_details": {"cached_tokens": 4}}  # fmt: skip
    u2 = {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27}
    steps = [
        {"tool_calls": [TERM], "reasoning": "r", "usage": u1, "cost": 0.001},
        {**FINAL, "usage": u2, "cost": 0.002},
    ]
    entry, stats = run_one(make_cfg, tmp_path, run_dir, script(*steps))
    assert entry["usage"] == {"prompt_tokens": 30, "completion_tokens": 12, "cached_tokens": 4,
                              "reasoning_tokens": 3, "total_tokens": 42, "cost_usd": pytest.approx(0.003)}  # fmt: skip
    assert stats["usage"]["total_tokens"] == 42


def test_ephemeral_prompt_and_prefill_are_sent_but_never_saved(make_cfg, tmp_path, run_dir, server):
    prefill = tmp_path / "prefill.json"
    prefill.write_text(
        json.dumps([{"role": "user", "content": "PREFILL-U"}, {"role": "assistant", "content": "PREFILL-A"}])
    )
    entry, _ = run_one(
        make_cfg, tmp_path, run_dir, "hello",
        "ephemeral_system_prompt=EPHEMERAL-SECRET-INSTRUCTION", f"prefill_messages_file={prefill}",
    )  # fmt: skip
    sent = server.requests[0].body["messages"]
    assert sent[0]["role"] == "system" and "EPHEMERAL-SECRET-INSTRUCTION" in sent[0]["content"]
    assert [m["content"] for m in sent[1:3]] == ["PREFILL-U", "PREFILL-A"]
    for path in run_dir.rglob("*"):
        if path.is_file() and path.name not in ("invocations.jsonl", "run.json") and ".hydra" not in path.parts:
            text = path.read_text(errors="replace")
            assert "EPHEMERAL-SECRET-INSTRUCTION" not in text and "PREFILL-U" not in text, path
    assert entry["conversations"][1] == {"from": "human", "value": "hello"}


def test_bad_prefill_file_is_a_clear_error(make_cfg, tmp_path, run_dir, server, caplog):
    bad = tmp_path / "p.json"
    bad.write_text('{"role": "user"}')
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    code, _ = run_inprocess(make_cfg(f"prefill_messages_file={bad}", dataset=ds), run_dir)
    assert code == 2 and "list of {role, content}" in caplog.text and server.requests == []


def test_provider_routing_and_reasoning_reach_the_request(make_cfg, tmp_path, run_dir, server):
    run_one(
        make_cfg, tmp_path, run_dir, "p",
        "model.reasoning_api=both", "reasoning=high", "provider.only=[anthropic,openai]",
        "provider.sort=latency", "max_tokens=321",
    )  # fmt: skip
    body = server.requests[0].body
    assert body["provider"] == {"only": ["anthropic", "openai"], "sort": "latency"}
    assert body["reasoning"] == {"effort": "high"} and body["reasoning_effort"] == "high"
    assert body["max_tokens"] == 321 and body["model"] == "local-model"
    server.reset()
    run_one(make_cfg, tmp_path, tmp_path / "r2", "p", "reasoning=disabled", "model.reasoning_api=openrouter")
    assert server.requests[0].body["reasoning"] == {"effort": "none"}


def test_api_key_is_sent_but_never_stored_or_shown_to_the_sandbox(make_cfg, tmp_path, run_dir, server, monkeypatch):
    secret = "sk-test-9f8e7d6c5b4a-do-not-leak"
    monkeypatch.setenv("HR_TEST_API_KEY", secret)
    steps = [
        {
            "tool_calls": [{"name": "terminal", "arguments": {"command": "env; cat /proc/self/environ"}}],
            "reasoning": "r",
        },
        FINAL,
    ]
    entry, _ = run_one(make_cfg, tmp_path, run_dir, script(*steps), "model.api_key_env=HR_TEST_API_KEY", "verbose=true")
    assert server.requests[0].headers["Authorization"] == f"Bearer {secret}"
    tool_turn = next(t for t in entry["conversations"] if t["from"] == "tool")
    assert "PATH=" in tool_turn["value"] and secret not in tool_turn["value"]
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path


@pytest.mark.parametrize("reply", [{"message": None}, {"message": "text"}, None])
def test_a_reply_without_a_message_is_retried_then_fails_never_kept(make_cfg, tmp_path, run_dir, server, reply):
    def null_message(body, srv):
        if reply is None:
            return web.Response(text="[1, 2]", content_type="application/json")  # JSON, but not an object
        return {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop", **reply}]}

    server.handler = null_message
    entry, stats = run_one(make_cfg, tmp_path, run_dir, "p", "model.max_retries=2", "filters.require_reasoning=false")
    assert entry is None and stats["prompts"]["failed"] == 1 and stats["prompts"]["ok"] == 0
    assert list(stats["failed_by_error"]) == ["ModelCallError"] and len(server.requests) == 3  # retried twice
    (failure,) = read_jsonl(run_dir / "failures.jsonl")
    assert failure["error"].startswith("MalformedReply after 2 retries: reply ")


def test_a_malformed_reply_then_a_good_one_completes(make_cfg, tmp_path, run_dir, server):
    calls = []

    def flaky(body, srv):
        calls.append(1)
        if len(calls) == 1:
            return {"choices": [{"index": 0, "message": None, "finish_reason": "stop"}]}
        return None  # the script's reply

    server.handler = flaky
    entry, stats = run_one(make_cfg, tmp_path, run_dir, script({"content": "fine", "reasoning": "r"}))
    assert entry is not None and entry["completed"] and stats["retries"] == 1
    assert entry["conversations"][-1]["value"].endswith("fine")


def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_refused_connection_stops_the_run_fast_and_leaves_the_rest_pending(
    make_cfg, tmp_path, run_dir, server, caplog, capsys
):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(40)])
    down = f"model.base_url=http://127.0.0.1:{closed_port()}/v1"
    started = time.monotonic()
    code, stats = run_inprocess(make_cfg(down, "num_workers=2", "retry_failed=false", dataset=ds), run_dir)
    took = time.monotonic() - started
    assert code == 4 and took < 15, took  # two short retries, not max_retries=6 of long backoff per prompt
    p = stats["prompts"]
    assert 1 <= p["failed"] <= 2 and p["pending"] == 40 - p["failed"] and p["ok"] == 0
    assert set(stats["failed_by_error"]) == {"EndpointRefused"}
    (error,) = {f["error"] for f in read_jsonl(run_dir / "failures.jsonl")}
    assert error.startswith("connection refused by http://127.0.0.1:") and "(2 retries)" in error
    assert "timed out" not in caplog.text.lower()
    assert caplog.text.count("no new prompt starts, the model endpoint can serve none") == 1
    out = capsys.readouterr().out
    assert "Stopped: connection refused by" in out and "40 prompts left to run" in out

    # Once the server is up, the same command runs everything, the refused prompts too (retry_failed=false).
    code, stats = run_inprocess(make_cfg("num_workers=2", "retry_failed=false", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 40 and stats["prompts"]["failed"] == 0


def test_refused_credentials_stop_the_run_after_one_call(make_cfg, tmp_path, run_dir, server, capsys):
    server.handler = lambda body, srv: web.json_response(
        {"error": {"message": "Incorrect API key provided", "code": 401}}, status=401
    )
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(30)])
    code, stats = run_inprocess(make_cfg("num_workers=1", dataset=ds), run_dir)
    assert code == 4 and len(server.requests) == 1  # not one 401 per prompt
    assert stats["failed_by_error"] == {"EndpointAuthError": 1} and stats["prompts"]["pending"] == 29
    out = capsys.readouterr().out
    assert "refused the credentials" in out and "HTTP 401" in out and "Incorrect API key" in out

    server.handler = None
    code, stats = run_inprocess(make_cfg("num_workers=1", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 30


def test_a_403_for_flagged_input_fails_only_that_prompt(make_cfg, tmp_path, run_dir, server):
    flagged = {"status": 403, "message": "Your chosen model requires moderation and your input was flagged"}
    ds = write_jsonl(
        tmp_path / "d.jsonl", [{"prompt": script({"fail": [flagged], **FINAL}, text="bad")}, {"prompt": "good"}]
    )
    code, stats = run_inprocess(make_cfg("num_workers=1", dataset=ds), run_dir)
    assert code == 1 and stats["failed_by_error"] == {"ModelCallError": 1} and stats["prompts"]["ok"] == 1
