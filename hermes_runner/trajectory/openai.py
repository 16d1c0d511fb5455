"""A trajectory entry (either output layout) as OpenAI chat-completions messages and tool schemas.

It reads the Hermes text format through `trajectory.hermes` only."""

from __future__ import annotations

from hermes_runner.trajectory.hermes import split_gpt, system_prompt_of, tool_responses, tools_of, turn_calls


def to_openai(entry: dict, reasoning: str = "field") -> dict:
    """{"messages", "tools"} of one entry; reasoning goes to `reasoning_content` ("field"),
    into the content as a <think> block ("inline"), or is dropped ("drop")."""
    if reasoning not in ("field", "inline", "drop"):
        raise ValueError(f"reasoning must be field, inline or drop, not {reasoning!r}")
    messages: list[dict] = []
    tools: list[dict] = []
    calls: list[dict] = []
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
        elif who == "tool":  # (a result without an id answers the call at its position)
            ids = [c["id"] for c in calls]
            for n, r in enumerate(tool_responses(value)):
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": r["tool_call_id"] or (ids[n] if n < len(ids) else ""),
                        "name": r["name"] or "",
                        "content": r["content"],
                    }
                )
    return {"messages": messages, "tools": tools}
