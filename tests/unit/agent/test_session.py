"""SessionRunner on ScriptedModel and a real local backend: toolsets, sandbox per prompt, failures recorded."""

from __future__ import annotations

import asyncio

from hermes_runner.agent.loop import StopReason
from hermes_runner.config import ErrorClass, LimitsConfig, RetryConfig, ScorerConfig, ScorerKind, VerifyOptions
from hermes_runner.scorers import open_scorers
from hermes_runner.testing.model import ScriptedModel

from tests.helpers.inprocess import Failure, SessionResult, prompt, run_cfg, session
from tests.helpers.run import script

TERM = {"name": "terminal", "arguments": {"command": "pwd; echo $HOME; touch mark"}}
FINAL = {"content": "done", "reasoning": "r"}


def test_each_prompt_gets_its_own_sandbox_and_its_sampled_toolsets(tmp_path):
    cfg = run_cfg(tmp_path, toolsets=("terminal",))
    steps = [{"tool_calls": [TERM]}, {"tool_calls": [{"name": "terminal", "arguments": {"command": "ls"}}]}, FINAL]
    outs = asyncio.run(session(ScriptedModel(steps), cfg, [prompt("one", 0), prompt("two", 1)]))
    assert all(isinstance(o, SessionResult) and o.completed for o in outs)
    assert [o.toolsets for o in outs] == [["terminal"], ["terminal"]]
    assert [t.name for t in outs[0].tools] == ["terminal"]
    listing = [o.history[4]["content"] for o in outs]
    assert all('"output": "mark\\n"' in text for text in listing)  # each saw only its own file


def test_the_same_prompt_draws_the_same_toolsets_and_unavailable_ones_are_never_offered(tmp_path):
    cfg = run_cfg(tmp_path, toolsets=("terminal", "file"))
    cfg.distribution.toolsets = {"terminal": 50.0, "file": 50.0, "web": 100.0}
    prompts = [prompt(f"p{i}", i) for i in range(6)]
    model = ScriptedModel([FINAL])
    first = asyncio.run(session(model, cfg, prompts, unavailable_toolsets={"web"}))
    again = asyncio.run(session(model, cfg, prompts, unavailable_toolsets={"web"}))
    assert [o.toolsets for o in first] == [o.toolsets for o in again]
    assert all(o.toolsets and "web" not in o.toolsets for o in first)
    assert {t["function"]["name"] for c in model.calls for t in c.tools}.isdisjoint({"web_search", "web_extract"})


def test_a_model_error_becomes_a_failure_that_keeps_the_spend(tmp_path):
    steps = [{"tool_calls": [TERM], "usage": {"total_tokens": 40}}, {"fail": [{"status": 400, "message": "nope"}]}]
    (out,) = asyncio.run(session(ScriptedModel(steps), run_cfg(tmp_path), [prompt("x")]))
    assert isinstance(out, Failure)
    assert (out.error_type, out.error, out.api_calls, out.usage.total_tokens) == ("ModelCallError", "nope", 1, 40)
    assert "ModelCallError" in out.traceback and out.toolsets == ["terminal", "file"] and out.duration_s > 0


def _verified(cfg, command: str):
    """The run's scorers: one `verify` running `command` in the prompt's sandbox."""
    return open_scorers({"v": ScorerConfig(kind=ScorerKind.verify, verify=VerifyOptions(command=command))}, cfg.model)


def test_a_prompt_over_its_time_limit_is_kept_at_its_last_assistant_turn_and_verified_in_its_sandbox(tmp_path):
    cfg = run_cfg(tmp_path, limits=LimitsConfig(timeout_s=5))  # ample for the first step: the second never ends
    hang = {"fail": [{"status": 500, "hang": 3600}]}  # the second call never returns: cancelled at the limit
    p = prompt(script({"tool_calls": [TERM]}, hang))
    scorers = _verified(cfg, "test -f mark")  # TERM touched it: what the agent left is verified
    (out,) = asyncio.run(session(ScriptedModel(), cfg, [p], scorers=scorers))
    assert isinstance(out, SessionResult) and out.stop_reason == StopReason.timeout
    assert out.partial and out.at_limit and not out.completed
    assert [m["role"] for m in out.history] == ["user", "assistant"]  # the tool results trimmed
    assert out.history[-1]["tool_calls"][0]["function"]["name"] == "terminal" and out.tool_calls == [("terminal", True)]
    assert out.api_calls == 1 and out.timeline[-1] == {**out.timeline[-1], "k": "model", "error": "CancelledError"}
    assert out.reward == 1.0 and out.scores[0]["passed"] and out.entry["stop_reason"] == "timeout"
    assert [t["from"] for t in out.entry["conversations"]] == ["system", "human", "gpt"]


def test_a_prompt_cancelled_in_its_first_call_keeps_its_prompt_and_is_still_verified(tmp_path):
    cfg = run_cfg(tmp_path, limits=LimitsConfig(timeout_s=3))  # ample for the sandbox to start
    (out,) = asyncio.run(
        session(ScriptedModel(), cfg, [prompt(script({"sleep": 3600, **FINAL}))], scorers=_verified(cfg, "false"))
    )
    assert isinstance(out, SessionResult) and out.stop_reason == StopReason.timeout
    assert [m["role"] for m in out.history] == ["user"] and out.api_calls == 0
    assert out.reward == 0.0 and out.scores[0]["explanation"] == "verify command exited 1"  # it ran: `false` failed


def test_retry_on_timeout_retries_a_timed_out_conversation_and_keeps_the_last_attempts(tmp_path):
    retry = RetryConfig(max_attempts=2, on=[ErrorClass.timeout], initial_wait_s=0)
    cfg = run_cfg(tmp_path, limits=LimitsConfig(timeout_s=2), retry=retry)  # 2 s: ample for the sandbox to start
    hang = {"status": 500, "hang": 3600}
    (out,) = asyncio.run(session(ScriptedModel(), cfg, [prompt(script({"fail": [hang, hang]}))]))
    assert isinstance(out, SessionResult) and out.stop_reason == StopReason.timeout  # the last attempt: kept
    (first,) = out.earlier_failures
    assert (first.error_type, first.error_class, first.attempt) == ("PromptTimeout", ErrorClass.timeout, 1)
    assert first.error.startswith("prompt exceeded limits.timeout_s=2s (stopped after ") and first.duration_s >= 2


def test_an_unavailable_image_fails_the_prompt_before_any_model_call(tmp_path):
    model = ScriptedModel([FINAL])
    p = prompt("needs an image", image="gone:latest")
    (out,) = asyncio.run(session(model, run_cfg(tmp_path), [p], unavailable_images={"gone:latest": "not found"}))
    assert isinstance(out, Failure) and out.error_type == "ImageUnavailable" and "not found" in out.error
    assert model.calls == [] and out.api_calls == 0


def test_a_tool_less_answer_is_a_result_with_the_model_that_answered(tmp_path):
    (out,) = asyncio.run(session(ScriptedModel([{**FINAL, "model": "vendor/x"}]), run_cfg(tmp_path), [prompt()]))
    assert isinstance(out, SessionResult) and out.model == "vendor/x" and out.api_calls == 1
