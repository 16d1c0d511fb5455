"""Trajectory entries: the ShareGPT conversion (Hermes function-calling style) and entry schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hermes_runner.agent import SessionResult
from hermes_runner.tools.registry import Tool

FUNCTION_CALL_SCHEMA = {
    "title": "FunctionCall",
    "type": "object",
    "properties": {"name": {"title": "Name", "type": "string"}, "arguments": {"title": "Arguments", "type": "object"}},
    "required": ["name", "arguments"],
}


_TOOLS_JSON: dict[tuple[str, ...], str] = {}  # by tool names: a run has few distinct tool sets


def _tools_json(tools: list[Tool]) -> str:
    key = tuple(t.name for t in tools)
    if key not in _TOOLS_JSON:
        listed = [
            {"name": t.name, "description": t.description, "parameters": t.parameters, "required": None} for t in tools
        ]
        _TOOLS_JSON[key] = json.dumps(listed, ensure_ascii=False)
    return _TOOLS_JSON[key]


def system_turn(tools: list[Tool], system_prompt: str = "") -> str:
    """The Hermes function-calling system message listing the tools the model really had."""
    text = (
        "You are a function-calling AI model. Function signatures are given inside <tools></tools> "
        "XML tags. You may call one or more of these functions to help with the user's request; if "
        "none of them fits, answer the user directly. Never guess argument values. The result of each "
        "call is returned inside <tool_response></tool_response> tags.\n"
        f"<tools>\n{_tools_json(tools)}\n</tools>\n"
        f"Every function call must follow this JSON schema: {json.dumps(FUNCTION_CALL_SCHEMA)}\n"
        "Put each function call inside <tool_call></tool_call> tags, for example:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-dict>}\n</tool_call>'
    )
    return f"{text}\n\n{system_prompt}" if system_prompt else text


def _parsed_args(raw: str) -> object:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _gpt_value(msg: dict) -> str:
    reasoning = msg.get("reasoning")
    parts = [f"<think>\n{reasoning}\n</think>" if reasoning else "<think>\n</think>"]
    content = (msg.get("content") or "").strip()
    if content:
        parts.append(content)
    for call in msg.get("tool_calls") or []:
        body = {"name": call["function"]["name"], "arguments": _parsed_args(call["function"]["arguments"])}
        parts.append(f"<tool_call>\n{json.dumps(body, ensure_ascii=False)}\n</tool_call>")
    return "\n".join(parts).rstrip()


def _tool_block(msg: dict) -> str:
    content: object = msg.get("content") or ""
    if isinstance(content, str) and content.lstrip()[:1] in ("{", "["):
        try:
            content = json.loads(content)
        except json.JSONDecodeError:
            pass
    body = {"tool_call_id": msg.get("tool_call_id"), "name": msg.get("name"), "content": content}
    return f"<tool_response>\n{json.dumps(body, ensure_ascii=False)}\n</tool_response>"


def conversations(result: SessionResult, system_prompt: str = "") -> list[dict]:
    turns: list[dict] = [{"from": "system", "value": system_turn(result.tools, system_prompt)}]
    pending_tools: list[str] = []
    for msg in result.history:
        role = msg["role"]
        if role == "tool":
            pending_tools.append(_tool_block(msg))
            continue
        if pending_tools:
            turns.append({"from": "tool", "value": "\n".join(pending_tools)})
            pending_tools = []
        if role == "user":
            turns.append({"from": "human", "value": msg["content"]})
        elif role == "assistant":
            turns.append({"from": "gpt", "value": _gpt_value(msg), "tool_calls": msg.get("tool_calls") or []})
    if pending_tools:
        turns.append({"from": "tool", "value": "\n".join(pending_tools)})
    return turns


def tool_stats(result: SessionResult, tool_names: list[str]) -> tuple[dict, dict]:
    """(tool_stats, tool_error_counts), zero-filled over every registered tool."""
    stats = {name: {"count": 0, "success": 0, "failure": 0} for name in tool_names}
    for name, ok in result.tool_calls:
        if name in stats:
            s = stats[name]
            s["count"] += 1
            s["success" if ok else "failure"] += 1
    return stats, {name: s["failure"] for name, s in stats.items()}


def reasoning_turns(result: SessionResult) -> tuple[int, int]:
    """(assistant turns, turns with reasoning)."""
    turns = [m for m in result.history if m["role"] == "assistant"]
    return len(turns), sum(1 for m in turns if m.get("reasoning"))


def unknown_tools(result: SessionResult, tool_names: list[str]) -> list[str]:
    valid = set(tool_names)
    return sorted({name for name, _ in result.tool_calls if name not in valid})


def entry(result: SessionResult, *, batch_num: int, model: str, tool_names: list[str], system_prompt: str) -> dict:
    """One line of batch_N.jsonl; every row has the same keys and types."""
    p = result.prompt
    stats, errors = tool_stats(result, tool_names)
    usage = result.usage.as_dict()
    usage["cost_usd"] = float(usage["cost_usd"])
    return {
        "prompt_index": p.index,
        "conversations": conversations(result, system_prompt),
        "metadata": {
            "batch_num": batch_num,
            "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
            "model": model,
            "prompt_key": p.key,
            "image": p.image,
            "cwd": p.cwd,
            "row_fields": json.dumps(p.fields, ensure_ascii=False, sort_keys=True),
        },
        "completed": result.completed,
        "partial": result.partial,
        "api_calls": result.api_calls,
        "toolsets_used": list(result.toolsets),
        "tool_stats": stats,
        "tool_error_counts": errors,
        "usage": usage,
    }
