"""Read a ShareGPT trajectory entry (either output layout) back into OpenAI chat messages and tool schemas."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

from hermes_runner import sharegpt

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
    turns = entry.get("conversations") or []
    for i, turn in enumerate(turns):
        who, value = turn.get("from"), turn.get("value") or ""
        if who == "system":
            tools = tools_of(value)
            text = system_prompt_of(value, tools) if tools else value
            if text:
                messages.append({"role": "system", "content": text})
        elif who == "human":
            messages.append({"role": "user", "content": value})
        elif who == "gpt":
            calls = turn_calls(turns, i)
            thought, content = split_gpt(value, 0 if turn.get("tool_calls") else value.count("<tool_call>"))
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
