"""An external program's trajectory, rebuilt from its last model call."""

from __future__ import annotations

from hermes_runner.agent.external import rebuild
from hermes_runner.agent.loop import SessionResult, StopReason
from hermes_runner.dataset import Prompt
from hermes_runner.model.base import Completion
from hermes_runner.usage import Usage

CALL = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
LOST = {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
TOOL = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
BODY = {
    "messages": [
        {"role": "system", "content": "You are X."},
        {"role": "user", "content": [{"type": "text", "text": "do it"}, {"type": "image_url", "image_url": {}}]},
        {"role": "assistant", "content": None, "tool_calls": [CALL, LOST], "reasoning_content": "plan"},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
    ],
    "tools": [TOOL],
}


def _res() -> SessionResult:
    return SessionResult(Prompt(index=0, key="k", prompt="do it"), [], [])


def test_the_last_call_becomes_the_conversation():
    res = _res()
    rebuild(res, BODY, Completion({"role": "assistant", "content": "ok"}, "stop", Usage()), None)
    assert res.system_prompt == "You are X." and res.external
    assert res.history[0] == {"role": "user", "content": "do it"}  # the text parts of a list of parts
    assert res.history[1]["reasoning"] == "plan" and res.history[1]["tool_calls"][0]["id"] == "c1"
    assert res.history[2] == {"role": "tool", "tool_call_id": "c1", "name": "bash", "content": "a.txt"}
    assert res.history[3] == {"role": "assistant", "content": "ok"}
    assert [t.openai_schema() for t in res.tools] == [TOOL]
    assert res.tool_calls == [("bash", True), ("bash", False)]  # c2 got no result
    assert res.stop_reason == StopReason.final_answer


def test_why_it_ended():
    cut = Completion({"role": "assistant", "content": "..."}, "length", Usage())
    res = _res()
    rebuild(res, BODY, cut, None)
    assert res.stop_reason == StopReason.length
    rebuild(res, BODY, cut, StopReason.max_turns)  # the proxy stopped answering
    assert res.stop_reason == StopReason.max_turns
