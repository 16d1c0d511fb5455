"""A checker of OpenAI's fine-tuning format (chat models, supervised), written from OpenAI's rules:

- the fine-tuning guide: each line is an object with `messages` (roles system, user, assistant, tool) and
  optionally `tools` (an array of function specs `{"type": "function", "function": {"name", "description",
  "parameters"}}`) and `parallel_tool_calls`; an assistant message's `tool_calls` items are `{"id", "type":
  "function", "function": {"name", "arguments"}}` with `arguments` a JSON string; a tool message carries the
  `tool_call_id` of a call made before it; `weight` (0 or 1) is allowed on assistant messages;
- the cookbook's data-preparation check (chat_finetuning_data_prep): every message has a known role and
  `content`, no key outside a role's own, and each example has an assistant message.

On top of them (what the export promises): no key with an empty value ("", [], {}, null), and every call of an
assistant message that is not the last one is answered by the tool messages right after it.
`violations(line)` lists what is wrong with one parsed line; `check_file(path)` counts them per kind.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

TOP_KEYS = {"messages", "tools", "parallel_tool_calls"}
MESSAGE_KEYS = {
    "system": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "weight"},
    "tool": {"role", "content", "tool_call_id"},
}
FUNCTION_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
EMPTY = ("", [], {}, None)


def _tool_problems(tools: object) -> tuple[list[str], set[str]]:
    if not isinstance(tools, list) or not tools:
        return ["tools_not_an_array"], set()
    found, names = [], set()
    for t in tools:
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict) or t.get("type") != "function" or set(t) != {"type", "function"}:
            found.append("tool_spec_format")
            continue
        if not isinstance(fn.get("name"), str) or not FUNCTION_NAME.fullmatch(fn["name"]):
            found.append("tool_spec_name")
        if set(fn) - {"name", "description", "parameters", "strict"}:
            found.append("tool_spec_unrecognized_key")
        if "parameters" in fn and not (isinstance(fn["parameters"], dict) and fn["parameters"].get("type") == "object"):
            found.append("tool_spec_parameters")
        names.add(fn.get("name"))
    return found, names


def _call_problems(calls: object, names: set[str] | None) -> list[str]:
    if not isinstance(calls, list) or not calls:
        return ["tool_calls_not_a_list"]
    found = []
    for c in calls:
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or set(c) != {"id", "type", "function"} or c.get("type") != "function":
            found.append("tool_call_format")
            continue
        if not isinstance(c["id"], str) or not c["id"]:
            found.append("tool_call_id_missing")
        if set(fn) != {"name", "arguments"} or not isinstance(fn["name"], str):
            found.append("tool_call_function_format")
        elif names is not None and fn["name"] not in names:
            found.append("tool_call_unknown_function")
        args = fn.get("arguments")
        if not isinstance(args, str):
            found.append("arguments_not_a_json_string")
        else:
            try:
                if not isinstance(json.loads(args), dict):
                    found.append("arguments_not_an_object")
            except json.JSONDecodeError:
                found.append("arguments_not_json")
    return found


def _message_problems(m: object, names: set[str] | None) -> list[str]:
    if not isinstance(m, dict) or "role" not in m:
        return ["message_missing_key"]
    role = m["role"]
    if role not in MESSAGE_KEYS:
        return ["unrecognized_role"]
    found = ["message_unrecognized_key"] if set(m) - MESSAGE_KEYS[role] else []
    found += ["empty_key"] * sum(v in EMPTY for v in m.values())
    calls = m.get("tool_calls")
    if "tool_calls" in m:
        found += _call_problems(calls, names)
    if not calls and not (isinstance(m.get("content"), str) and m["content"]):
        found.append("missing_content")
    elif "content" in m and not isinstance(m["content"], str):
        found.append("content_not_a_string")
    if "weight" in m and m["weight"] not in (0, 1):
        found.append("weight_not_0_or_1")
    if role == "tool" and not (isinstance(m.get("tool_call_id"), str) and m["tool_call_id"]):
        found.append("tool_call_id_missing")
    return found


def _order_problems(messages: list) -> list[str]:
    """Tool messages answer the calls of the assistant message before them, each once; a call is answered
    before the conversation goes on (the last assistant message may end on calls)."""
    found, pending, seen = [], [], set()
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "tool":
            cid = m.get("tool_call_id")
            if cid in pending:
                pending.remove(cid)
            else:
                found.append("tool_message_answers_no_call")
            continue
        if pending:
            found.append("unanswered_tool_call")
        pending = [c.get("id") for c in m.get("tool_calls") or [] if isinstance(c, dict)]
        if seen & set(pending) or len(set(pending)) < len(pending):
            found.append("duplicate_tool_call_id")
        seen |= set(pending)
    return found


def violations(line: object, extra_keys: frozenset[str] = frozenset()) -> list[str]:
    """What breaks OpenAI's fine-tuning rules in one parsed line (`extra_keys`: top-level keys asked for)."""
    if not isinstance(line, dict):
        return ["data_type"]
    messages = line.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["missing_messages_list"]
    found = ["unrecognized_top_level_key"] * len(set(line) - TOP_KEYS - extra_keys)
    found += ["empty_key"] * sum(line[k] in EMPTY for k in line if k in TOP_KEYS)
    names = None
    if "tools" in line:
        problems, names = _tool_problems(line["tools"])
        found += problems
    if "parallel_tool_calls" in line and not isinstance(line["parallel_tool_calls"], bool):
        found.append("parallel_tool_calls_not_a_bool")
    for m in messages:
        found += _message_problems(m, names)
    if not any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages):
        found.append("example_missing_assistant_message")
    return found + _order_problems(messages)


def check_file(path: Path, extra_keys: frozenset[str] = frozenset()) -> Counter:
    """Violations of every line of a JSONL file, counted per kind (empty: the file passes)."""
    found: Counter = Counter()
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            found.update(violations(json.loads(raw), extra_keys))
        except json.JSONDecodeError:
            found["line_not_json"] += 1
    return found
