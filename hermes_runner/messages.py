"""Read a ShareGPT trajectory entry back into OpenAI chat messages and tool schemas."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

from hermes_runner import sharegpt

_TOOLS_RE = re.compile(r"<tools>\n(.*?)\n</tools>", re.S)
_THINK_RE = re.compile(r"\A<think>\n(.*?)\n?</think>\n?", re.S)
_CALL_TAIL_RE = re.compile(r"\n?<tool_call>\n.*?\n</tool_call>\Z", re.S)
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
    listed = [
        SimpleNamespace(
            name=t["function"]["name"], description=t["function"]["description"], parameters=t["function"]["parameters"]
        )
        for t in tools
    ]
    head = sharegpt.system_turn(listed)  # type: ignore[arg-type]
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
        out.append(
            {
                "id": str(c.get("id") or ""),
                "type": "function",
                "function": {
                    "name": str(fn.get("name") or ""),
                    "arguments": args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False),
                },
            }
        )
    return out


def to_openai(entry: dict, reasoning: str = "field") -> dict:
    """{"messages", "tools"} of one entry; reasoning goes to `reasoning_content` ("field"),
    into the content as a <think> block ("inline"), or is dropped ("drop")."""
    if reasoning not in ("field", "inline", "drop"):
        raise ValueError(f"reasoning must be field, inline or drop, not {reasoning!r}")
    messages: list[dict] = []
    tools: list[dict] = []
    for turn in entry.get("conversations") or []:
        who, value = turn.get("from"), turn.get("value") or ""
        if who == "system":
            tools = tools_of(value)
            text = system_prompt_of(value, tools) if tools else value
            if text:
                messages.append({"role": "system", "content": text})
        elif who == "human":
            messages.append({"role": "user", "content": value})
        elif who == "gpt":
            calls = clean_calls(turn.get("tool_calls") or [])
            thought, content = split_gpt(value, len(calls))
            msg: dict = {"role": "assistant", "content": content or None}
            if thought and reasoning == "field":
                msg["reasoning_content"] = thought
            elif thought and reasoning == "inline":
                msg["content"] = f"<think>\n{thought}\n</think>\n{content}".rstrip()
            if calls:
                msg["tool_calls"] = calls
            elif msg["content"] is None:
                msg["content"] = ""
            messages.append(msg)
        elif who == "tool":
            for r in tool_responses(value):
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": r["tool_call_id"] or "",
                        "name": r["name"] or "",
                        "content": r["content"],
                    }
                )
    return {"messages": messages, "tools": tools}
