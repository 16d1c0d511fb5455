"""The spans of sessions run by the real SessionRunner (ScriptedModel, a real local sandbox, the SDK writing the
OTLP JSON lines file): invalid tool calls, max_turns with its summary call, a failed prompt, content capture."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

from hermes_runner.agent.loop import SessionResult
from hermes_runner.config import TelemetryConfig
from hermes_runner.telemetry import genai, open_trace
from hermes_runner.testing.model import ScriptedModel

from tests.helpers.inprocess import AgentSettings, prompt, run_cfg, session
from tests.helpers.otlp import op, read_file
from tests.helpers.run import script

TERM = {"name": "terminal", "arguments": {"command": "echo hi"}}


def traced(tmp_path, prompts, capture: bool = False):
    path = tmp_path / "spans.jsonl"
    trace = open_trace(TelemetryConfig(otlp_file=str(path), capture_content=capture), {"hermes.run_name": "unit"})
    model = trace.model(ScriptedModel(), genai.chat_request("scripted", None, None, None))
    cfg = run_cfg(tmp_path / "sb", toolsets=["terminal"], max_turns=2)
    try:
        outcomes = asyncio.run(session(model, cfg, prompts, AgentSettings(max_turns=2), trace=trace))
    finally:
        trace.shutdown()
    return outcomes, {r.attrs["gen_ai.conversation.id"]: r for r in read_file(path) if not r.parent_id}


def test_invalid_calls_max_turns_and_a_failed_prompt(tmp_path):
    stopped = script({"tool_calls": [{"name": "teleport", "arguments": {}}], "reasoning": "r"},
                     {"tool_calls": [TERM], "reasoning": "r"}, text="stops")  # fmt: skip
    failing = script({"content": "x", "fail": [{"status": 400, "message": "bad request"}]}, text="fails")
    prompts = [prompt(stopped, 0), prompt(failing, 1)]
    (res, failure), roots = traced(tmp_path, prompts)
    assert isinstance(res, SessionResult) and res.stop_reason == "max_turns"
    root = roots[prompts[0].key]
    ops = Counter(op(c) for c in root.children)
    assert ops == {"chat": 3, "execute_tool": 2}  # two turns and the summary call without tools
    assert res.api_calls == 3 and root.attrs["hermes.stop_reason"] == "max_turns"
    teleport, terminal = (c for c in root.children if op(c) == "execute_tool")
    assert teleport.attrs["error.type"] == "invalid_tool_call" and teleport.status == 2 and not teleport.children
    assert [c.attrs["process.exit.code"] for c in terminal.children] == [0] and terminal.status == 0
    assert root.attrs["gen_ai.usage.input_tokens"] == res.usage.prompt_tokens > 0
    bad = roots[prompts[1].key]
    assert bad.status == 2 and bad.attrs["error.type"] == failure.error_type == "ModelCallError"
    (call,) = bad.children
    assert op(call) == "chat" and call.status == 2 and call.attrs["error.type"] == "ModelCallError"
    assert not any(k.startswith("gen_ai.input") for k in call.attrs)


def test_capture_content_puts_the_conversation_in(tmp_path):
    p = prompt(script({"tool_calls": [TERM], "reasoning": "r"}, {"content": "the end", "reasoning": "r"}, text="go"))
    _, roots = traced(tmp_path, [p], capture=True)
    chats = [c for c in roots[p.key].children if op(c) == "chat"]
    last = json.loads(chats[-1].attrs["gen_ai.output.messages"])
    assert last[0]["parts"][-1] == {"type": "text", "content": "the end"}
    sent = json.loads(chats[-1].attrs["gen_ai.input.messages"])
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    (tool,) = (c for c in roots[p.key].children if op(c) == "execute_tool")
    assert tool.children[0].attrs["process.command_line"] == "echo hi"
