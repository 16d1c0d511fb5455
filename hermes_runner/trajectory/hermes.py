"""The Hermes text format both ways: the writers of a trajectory's turns (the system turn listing the tools,
a gpt turn's `<think>` and `<tool_call>` blocks, a tool turn's `<tool_response>` blocks) and, beside them, their
readers (back to OpenAI tool schemas, reasoning, content, calls and tool responses), for either output layout.

It speaks OpenAI-style dicts only (tools as OpenAI tool schemas, messages as chat-completions messages)."""

from __future__ import annotations

import json
import re

FUNCTION_CALL_SCHEMA = {
    "title": "FunctionCall",
    "type": "object",
    "properties": {"name": {"title": "Name", "type": "string"}, "arguments": {"title": "Arguments", "type": "object"}},
    "required": ["name", "arguments"],
}


# The tool listing's JSON text, cached by tool names: the tool sets of a run are few, and every entry lists one.
_TOOLS_JSON: dict[tuple[str, ...], str] = {}


def _tools_json(tools: list[dict]) -> str:
    key = tuple(t["function"]["name"] for t in tools)
    if key not in _TOOLS_JSON:
        listed = [
            {
                "name": t["function"]["name"],
                "description": t["function"]["description"],
                "parameters": t["function"]["parameters"],
                "required": None,
            }
            for t in tools
        ]
        _TOOLS_JSON[key] = json.dumps(listed, ensure_ascii=False)
    return _TOOLS_JSON[key]


def system_turn(tools: list[dict], system_prompt: str = "") -> str:
    """The Hermes function-calling system message listing the tools the model really had (OpenAI tool schemas)."""
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


def parsed_args(raw: str) -> dict:
    """A call's `arguments` text as a JSON object ({} when it is not one)."""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _gpt_value(msg: dict, with_calls: bool = True) -> str:
    reasoning = msg.get("reasoning")
    parts = [f"<think>\n{reasoning}\n</think>" if reasoning else "<think>\n</think>"]
    content = (msg.get("content") or "").strip()
    if content:
        parts.append(content)
    for call in (msg.get("tool_calls") or []) if with_calls else []:
        body = {"name": call["function"]["name"], "arguments": parsed_args(call["function"]["arguments"])}
        parts.append(f"<tool_call>\n{json.dumps(body, ensure_ascii=False)}\n</tool_call>")
    return "\n".join(parts).rstrip()


def call_dict(cid: str, name: str, arguments: object) -> dict:
    """One tool call in the OpenAI shape."""
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def structured_calls(msg: dict) -> list[dict]:
    """An assistant message's calls as the structured layout keeps them: arguments as JSON objects."""
    return [
        call_dict(str(c.get("id") or ""), str(c["function"]["name"]), parsed_args(c["function"]["arguments"]))
        for c in msg.get("tool_calls") or []
    ]


def _tool_block(msg: dict) -> str:
    content: object = msg.get("content") or ""
    if isinstance(content, str) and content.lstrip()[:1] in ("{", "["):
        try:
            content = json.loads(content)
        except json.JSONDecodeError:
            pass
    body = {"tool_call_id": msg.get("tool_call_id"), "name": msg.get("name"), "content": content}
    return f"<tool_response>\n{json.dumps(body, ensure_ascii=False)}\n</tool_response>"


_TOOLS_RE = re.compile(r"<tools>\n(.*?)\n</tools>", re.S)
_THINK_RE = re.compile(r"\A<think>\n(.*?)\n?</think>\n?", re.S)
_CALL_TAIL_RE = re.compile(r"\n?<tool_call>\n.*?\n</tool_call>\Z", re.S)
_CALL_RE = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)
_RESPONSE_RE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.S)


def tools_of(system: str) -> list[dict]:
    """The tools listed in a Hermes system turn, as OpenAI tool schemas."""
    m = _TOOLS_RE.search(system)
    if not m:
        return []
    try:
        listed = json.loads(m.group(1))
    except json.JSONDecodeError:
        return []
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t.get("parameters") or {},
            },
        }
        for t in listed
        if isinstance(t, dict) and isinstance(t.get("name"), str)
    ]


def system_prompt_of(system: str, tools: list[dict]) -> str:
    """The run's own system prompt inside a Hermes system turn (the text after the tool listing)."""
    head = system_turn(tools)
    if system == head:
        return ""
    if system.startswith(head + "\n\n"):
        return system[len(head) + 2 :]
    return system  # not ours: keep it whole


def split_gpt(value: str, n_calls: int) -> tuple[str, str]:
    """(reasoning, content) of a gpt turn, without its <think> block and its n trailing <tool_call> blocks."""
    reasoning = ""
    m = _THINK_RE.match(value)
    if m:
        reasoning, value = m.group(1), value[m.end() :]
    for _ in range(n_calls):
        value, n = _CALL_TAIL_RE.subn("", value, count=1)
        if not n:
            break
    return reasoning.strip(), value.strip()


def text_calls(value: str) -> list[dict]:
    """The trailing `<tool_call>` blocks of a hermes-layout gpt turn, as {name, arguments (object)}."""
    end = len(value.rstrip())
    tail = []
    for m in reversed(list(_CALL_RE.finditer(value))):
        if m.end() != end:
            break
        tail.append(m.group(1))
        end = len(value[: m.start()].rstrip())
    out = []
    for raw in reversed(tail):
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("name"), str):
            args = body.get("arguments")
            out.append({"name": body["name"], "arguments": args if isinstance(args, dict) else {}})
    return out


def turn_calls(turns: list[dict], i: int) -> list[dict]:
    """The tool calls of gpt turn `i` in the strict OpenAI shape, from either layout: its `tool_calls`
    (structured) or the `<tool_call>` blocks of its value (hermes), whose ids are those of the tool turn
    that answers them (by position; `call_<turn>_<n>` when there is none)."""
    turn = turns[i]
    if turn.get("tool_calls"):
        return clean_calls(turn["tool_calls"])
    calls = text_calls(turn.get("value") or "")
    if not calls:
        return []
    answer = turns[i + 1] if i + 1 < len(turns) and turns[i + 1].get("from") == "tool" else None
    ids = [r["tool_call_id"] for r in tool_responses(answer.get("value") or "")] if answer else []
    return clean_calls(
        [{"id": ids[n] if n < len(ids) and ids[n] else f"call_{i}_{n}", "function": c} for n, c in enumerate(calls)]
    )


def tool_responses(value: str) -> list[dict]:
    """The {tool_call_id, name, content (str)} blocks of a tool turn."""
    out = []
    for m in _RESPONSE_RE.finditer(value):
        try:
            body = json.loads(m.group(1))
        except json.JSONDecodeError:
            body = {"content": m.group(1)}
        content = body.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        out.append({"tool_call_id": body.get("tool_call_id"), "name": body.get("name"), "content": content})
    if not out and value.strip():
        out.append({"tool_call_id": None, "name": None, "content": value})
    return out


def clean_calls(calls: list[dict]) -> list[dict]:
    """Tool calls in the strict OpenAI shape (arguments always a string)."""
    out = []
    for c in calls or []:
        fn = c.get("function") or {}
        args = fn.get("arguments")
        args = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
        out.append(call_dict(str(c.get("id") or ""), str(fn.get("name") or ""), args))
    return out
