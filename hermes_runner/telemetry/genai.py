"""The spans' names and attributes, after the OpenTelemetry GenAI semantic conventions (gen_ai.*), from the run's
own records; what the conventions do not name is under `hermes.*` (cost, retries, stop reason, ...).

Pure functions of plain values: no OpenTelemetry import (tests/unit/telemetry checks the names against the
`opentelemetry-semantic-conventions` package)."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from hermes_runner.model.base import Completion
from hermes_runner.usage import Usage
from hermes_runner.util.text import clip

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
EVALUATION_NAME = "gen_ai.evaluation.name"
SCORE_VALUE = "gen_ai.evaluation.score.value"
SCORE_LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
EXIT_CODE = "process.exit.code"
COMMAND_LINE = "process.command_line"
COST = "hermes.usage.cost_usd"  # USD: the provider's reported cost, else the model's price table (usage.py)

AGENT = "hermes-runner"
CONTENT_CHARS = 20_000  # a captured text longer than this is clipped (head and tail)


def session(key: str, index: int, sample: int, model: str) -> dict:
    """The invoke_agent span of one prompt's session, as it starts."""
    return {OPERATION: "invoke_agent", AGENT_NAME: AGENT, CONVERSATION_ID: key, REQUEST_MODEL: model,
            "hermes.prompt.index": index, "hermes.prompt.sample": sample}  # fmt: skip


def usage(u: Usage) -> dict:
    """Token usage and cost: of one call (chat), or of a whole session (invoke_agent: every attempt, the judges)."""
    return {INPUT_TOKENS: u.prompt_tokens, OUTPUT_TOKENS: u.completion_tokens, CACHE_READ_TOKENS: u.cached_tokens,
            REASONING_TOKENS: u.reasoning_tokens, COST: u.cost_usd}  # fmt: skip


def chat_request(model: str, base_url: str | None, temperature: float | None, max_tokens: int | None) -> dict:
    """The chat spans' request attributes: the model asked for and the endpoint's host (never its URL or headers)."""
    attrs: dict = {OPERATION: "chat", PROVIDER: "openai", REQUEST_MODEL: model}  # the OpenAI chat completions API
    parts = urlsplit(base_url or "")
    if parts.hostname:
        attrs[SERVER_ADDRESS] = parts.hostname
        attrs[SERVER_PORT] = parts.port or (443 if parts.scheme == "https" else 80)
    if temperature is not None:
        attrs[REQUEST_TEMPERATURE] = temperature
    if max_tokens is not None:
        attrs[REQUEST_MAX_TOKENS] = max_tokens
    return attrs


def chat_response(reply: Completion) -> dict:
    """A chat span's response: the model that answered, why it stopped, usage and cost, retries, cache replay."""
    attrs = {FINISH_REASONS: [reply.finish_reason or ""], "hermes.retries": reply.retries,
             "hermes.cached": reply.cached, **usage(reply.usage)}  # fmt: skip
    if reply.model:
        attrs[RESPONSE_MODEL] = reply.model
    return attrs


def tool(call: dict) -> dict:
    """An execute_tool span, from the assistant's tool call."""
    fn = call.get("function") or {}
    return {OPERATION: "execute_tool", TOOL_NAME: str(fn.get("name", "")), TOOL_CALL_ID: str(call.get("id", "")),
            TOOL_TYPE: "function"}  # fmt: skip


def scorer(name: str, kind: str) -> dict:
    return {EVALUATION_NAME: name, "hermes.scorer.kind": kind}


def score(value: float, passed: bool, explanation: str) -> dict:
    return {SCORE_VALUE: value, SCORE_LABEL: "pass" if passed else "fail", EXPLANATION: clip(explanation, 2000)}


def text(value: str) -> str:
    return clip(value, CONTENT_CHARS)


def messages(history: list[dict]) -> tuple[str, str]:
    """(gen_ai.system_instructions, gen_ai.input.messages) of a request's OpenAI messages, as the conventions'
    JSON: messages of role and parts (text, tool_call, tool_call_response)."""
    system = [{"type": "text", "content": text(_content(m))} for m in history if m.get("role") == "system"]
    rest = [message(m) for m in history if m.get("role") != "system"]
    return json_text(system), json_text(rest)


def message(m: dict) -> dict:
    """One OpenAI message as a GenAI-conventions message."""
    role = m.get("role", "")
    if role == "tool":
        part = {"type": "tool_call_response", "id": m.get("tool_call_id", ""), "response": text(_content(m))}
        return {"role": "tool", "parts": [part]}
    parts: list[dict] = []
    if reasoning := m.get("reasoning"):
        parts.append({"type": "reasoning", "content": text(str(reasoning))})
    if content := _content(m):
        parts.append({"type": "text", "content": text(content)})
    for c in m.get("tool_calls") or []:
        fn = c.get("function") or {}
        parts.append({"type": "tool_call", "id": c.get("id", ""), "name": fn.get("name", ""),
                      "arguments": text(str(fn.get("arguments") or ""))})  # fmt: skip
    return {"role": role, "parts": parts}


def json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _content(m: dict) -> str:
    c = m.get("content")
    return c if isinstance(c, str) else json.dumps(c, ensure_ascii=False) if c else ""
