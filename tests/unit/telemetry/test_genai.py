"""The spans' attribute names are the GenAI semantic conventions' (as the official package spells them), their
values come from the run's records, and telemetry off imports no OpenTelemetry module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from opentelemetry.semconv._incubating.attributes import error_attributes, gen_ai_attributes, process_attributes
from opentelemetry.semconv._incubating.attributes import server_attributes as server

from hermes_runner.config import TelemetryConfig
from hermes_runner.config.check import problems
from hermes_runner.errors import ConfigError
from hermes_runner.model.base import Completion
from hermes_runner.telemetry import Trace, check_telemetry, genai
from hermes_runner.usage import Usage

from tests.helpers.run import ROOT


def test_the_names_are_the_semantic_conventions():
    ours = {v for k, v in vars(genai).items() if k.isupper() and isinstance(v, str) and "." in v}
    official = {v for m in (gen_ai_attributes, error_attributes, process_attributes, server) for v in vars(m).values()
                if isinstance(v, str)}  # fmt: skip
    assert ours - official == {genai.COST}, "every name but the cost's is a convention's"
    ops = {o.value for o in gen_ai_attributes.GenAiOperationNameValues}
    assert {"chat", "execute_tool", "invoke_agent"} <= ops


def test_a_reply_gives_usage_cost_and_the_answering_model():
    reply = Completion({"role": "assistant", "content": "hi"}, "stop", Usage(12, 5, 3, 2, 17, 0.25), 1, "m-2")
    attrs = genai.chat_response(reply)
    assert attrs[genai.INPUT_TOKENS] == 12 and attrs[genai.OUTPUT_TOKENS] == 5 and attrs[genai.COST] == 0.25
    assert attrs[genai.CACHE_READ_TOKENS] == 3 and attrs[genai.REASONING_TOKENS] == 2
    assert attrs[genai.RESPONSE_MODEL] == "m-2" and attrs[genai.FINISH_REASONS] == ["stop"]
    assert attrs["hermes.retries"] == 1 and attrs["hermes.cached"] is False


def test_the_request_names_the_host_never_the_url():
    attrs = genai.chat_request("m", "https://user:pw@api.example.com/v1?key=sekrit", 0.2, None)
    assert attrs[genai.SERVER_ADDRESS] == "api.example.com" and attrs[genai.SERVER_PORT] == 443
    assert "sekrit" not in json.dumps(attrs) and "pw" not in json.dumps(attrs)
    assert genai.REQUEST_MAX_TOKENS not in attrs and attrs[genai.REQUEST_TEMPERATURE] == 0.2


def test_messages_in_the_conventions_shape():
    call = {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls"}'}}
    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": "", "reasoning": "look", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "name": "terminal", "content": "a.txt"},
    ]
    system, sent = genai.messages(history)
    assert json.loads(system) == [{"type": "text", "content": "be brief"}]
    user, assistant, tool = json.loads(sent)
    assert user == {"role": "user", "parts": [{"type": "text", "content": "list"}]}
    assert assistant["parts"] == [
        {"type": "reasoning", "content": "look"},
        {"type": "tool_call", "id": "c1", "name": "terminal", "arguments": '{"command": "ls"}'},
    ]
    assert tool == {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "a.txt"}]}


def test_the_endpoint_must_be_http_and_the_file_dir_must_exist(tmp_path):
    assert problems(TelemetryConfig(otlp_endpoint="localhost:4318"), "telemetry") == [
        "telemetry.otlp_endpoint must be an http:// or https:// URL (OTLP/HTTP), not 'localhost:4318'"
    ]
    assert not problems(TelemetryConfig(otlp_endpoint="http://127.0.0.1:4318/v1/traces"), "telemetry")
    with pytest.raises(ConfigError, match="no-such-dir/spans.jsonl: its directory does not exist"):
        check_telemetry(TelemetryConfig(otlp_file=str(tmp_path / "no-such-dir" / "spans.jsonl")))
    check_telemetry(TelemetryConfig(otlp_file=str(tmp_path / "spans.jsonl")))


def test_telemetry_off_imports_no_opentelemetry():
    code = (
        "import sys, asyncio\n"
        "from hermes_runner.agent import worker\n"
        "from hermes_runner.config import TelemetryConfig\n"
        "from hermes_runner.telemetry import open_trace\n"
        "t = open_trace(TelemetryConfig(), {})\n"
        "with t.span('x', {}) as s: s.set({'a': 1})\n"
        "assert type(t).__name__ == 'Trace', t\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_no_op_trace_leaves_model_and_sandbox_as_they_are():
    t, thing = Trace(), object()
    assert t.model(thing, {}) is thing and t.sandbox(thing) is thing and t.content("k", "v") == {}
