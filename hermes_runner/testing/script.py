"""The `#script` grammar, shared by the HTTP scripted server and the in-process `ScriptedModel`.

A line ``#script <json list>`` in the first user message scripts the assistant turn by turn (turn = number
of assistant messages already in the conversation). A step may hold ``content``, ``tool_calls``
(``[{"name", "arguments" (object or raw string), "id"?}]``), ``reasoning`` with ``reasoning_field``
(reasoning | reasoning_content | reasoning_details | think | scratchpad: where the wire reply puts it),
``finish_reason``, ``sleep`` (seconds), ``usage`` (fields that replace the estimated counts), ``cost``,
``model`` (the model the reply says answered) and ``fail``: a list of errors
(``{"status", "retry_after", "message", "hang", "midstream", "cut"}``) for the first attempts of that step.
Past the end of the script the model answers "Done.". A conversation offered no tools never gets tool
calls: such a step answers with its ``content`` (or a fixed line), as a real model offered no tools does.
Without a script: call ``terminal`` once (when offered) with ``echo``, then answer; a last user message
with images (``image_url`` data URLs) is answered with what they are (type, pixel size, bytes, sha256).

A first user message with a line ``#judging`` is a scorer's judge asking (a test's rubric holds that line):
it is answered with the step of the ``#judge <json step>`` line in the same message (the judged prompt's own,
quoted by the rubric), else ``JUDGE_DEFAULT``; the ``#script`` lines quoted in it are ignored.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import zlib

from hermes_runner.errors import ScriptSyntaxError

PAST_THE_END = {"content": "Done.", "reasoning": "Nothing left to do."}
NO_TOOLS_ANSWER = "Out of turns: here is what I found so far."


def first_user(messages: list[dict]) -> str:
    """The first user message's text (JSON for multi-part content): where a script is read from."""
    for m in messages:
        if m.get("role") == "user":
            c = m.get("content")
            return c if isinstance(c, str) else json.dumps(c)
    return ""


def turn_of(messages: list[dict]) -> int:
    """Which step answers: the number of assistant messages so far."""
    return sum(1 for m in messages if m.get("role") == "assistant")


JUDGE_DEFAULT = {"content": json.dumps({"score": 1, "explanation": "fine"})}


def parse_script(prompt: str) -> list[dict] | None:
    """The steps of the prompt's `#script` line (a judge's request: its one `#judge` step), or None without one."""
    lines = prompt.splitlines()
    if "#judging" in lines:
        return [parse_judge(lines)]
    steps = _tagged_json(lines, "#script", list)
    if steps is not None and not all(isinstance(s, dict) for s in steps):
        raise ScriptSyntaxError("bad #script: not a JSON list of objects")
    return steps


def parse_judge(lines: list[str]) -> dict:
    """The scripted reply of a judge's request (see the module docstring)."""
    step = _tagged_json(lines, "#judge", dict)
    return step if step is not None else dict(JUDGE_DEFAULT)


def _tagged_json(lines: list[str], tag: str, kind: type) -> list | dict | None:
    """The JSON value of the first `<tag> <json>` line (None without one), which must be a `kind`."""
    for line in lines:
        if line.startswith(tag + " "):
            try:
                value = json.loads(line[len(tag) + 1 :])
            except json.JSONDecodeError as exc:
                raise ScriptSyntaxError(f"bad {tag}: {exc}") from None
            if not isinstance(value, kind):
                raise ScriptSyntaxError(f"bad {tag}: not a JSON {'list of objects' if kind is list else 'object'}")
            return value
    return None


def attempt_key(prompt: str, turn: int) -> str:
    """Counts the attempts at one step of one conversation (for `fail`)."""
    return hashlib.blake2b(f"{prompt}\0{turn}".encode(), digest_size=8).hexdigest()


def step_for(messages: list[dict], tools: list[dict], steps: list[dict] | None = None) -> dict:
    """The step that answers this conversation: `steps` (else the prompt's script, else the default)."""
    turn = turn_of(messages)
    if steps is None:
        steps = parse_script(first_user(messages))
    if steps is None:
        return default_step(messages, tools, turn)
    return steps[turn] if turn < len(steps) else dict(PAST_THE_END)


def failure(step: dict, attempt: int) -> dict | None:
    """The scripted error for this attempt at the step, if any."""
    fails = step.get("fail") or []
    return fails[attempt] if attempt < len(fails) else None


def offered(step: dict, tools: list[dict]) -> dict:
    """The step as answered when no tools are offered: no calls, some content."""
    if not step.get("tool_calls") or tools:
        return step
    out = {k: v for k, v in step.items() if k not in ("tool_calls", "finish_reason")}
    out["content"] = out.get("content") or NO_TOOLS_ANSWER
    return out


def default_step(messages: list[dict], tools: list[dict], turn: int) -> dict:
    images = images_in_last_user(messages)
    if images:
        seen = "; ".join(describe_image(d) for d in images)
        return {"reasoning": "I looked at the image.", "content": f"I see {len(images)} image(s): {seen}"}
    names = {t.get("function", {}).get("name") for t in tools or []}
    if turn == 0 and "terminal" in names:
        return {
            "reasoning": "I should run a command to check.",
            "tool_calls": [{"name": "terminal", "arguments": {"command": "echo hello"}}],
        }
    return {"reasoning": "The command worked; I can answer.", "content": "The answer is hello."}


# -- a step as a reply -------------------------------------------------------------------------------


def tool_calls(step: dict, n: int) -> list[dict]:
    """The step's calls in the OpenAI shape (arguments as a JSON string, ids `call_<n>_<i>` unless given)."""
    calls = []
    for i, c in enumerate(step.get("tool_calls") or []):
        args = c.get("arguments", {})
        calls.append(
            {
                "id": c.get("id", f"call_{n}_{i}"),
                "type": "function",
                "function": {"name": c["name"], "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
        )
    return calls


def wire_message(step: dict, n: int) -> dict:
    """The assistant message as the server sends it: the reasoning where `reasoning_field` says."""
    msg: dict = {"role": "assistant", "content": step.get("content")}
    reasoning, where = step.get("reasoning"), step.get("reasoning_field", "reasoning")
    if reasoning:
        if where == "reasoning":
            msg["reasoning"] = reasoning
        elif where == "reasoning_content":
            msg["reasoning_content"] = reasoning
        elif where == "reasoning_details":
            msg["reasoning_details"] = [{"type": "reasoning.text", "text": reasoning, "format": "unknown", "index": 0}]
        elif where == "think":
            msg["content"] = f"<think>{reasoning}</think>\n{msg['content'] or ''}"
        elif where == "scratchpad":
            msg["content"] = f"<REASONING_SCRATCHPAD>{reasoning}</REASONING_SCRATCHPAD>\n{msg['content'] or ''}"
    calls = tool_calls(step, n)
    if calls:
        msg["tool_calls"] = calls
    return msg


def message(step: dict, n: int) -> dict:
    """The assistant message as a `ChatModel` returns it (the client's reading of `wire_message`)."""
    wire = wire_message(step, n)
    content = step.get("content") or ""
    if step.get("reasoning") and step.get("reasoning_field") in ("think", "scratchpad"):
        content = content.strip()  # the client strips what is left once the inline block is cut out
    msg: dict = {"role": "assistant", "content": content}
    if wire.get("tool_calls"):
        msg["tool_calls"] = wire["tool_calls"]
    if (step.get("reasoning") or "").strip():
        msg["reasoning"] = step["reasoning"].strip()
    if wire.get("reasoning_details"):
        msg["reasoning_details"] = wire["reasoning_details"]
    return msg


END_ID = 256  # the byte tokenizer's end-of-turn token (its ids 0..255 are the UTF-8 bytes)
LOGPROB = -0.25  # the logprob it reports for every sampled token


def chatml_text(m: dict) -> str:
    """A message's text in the prompt: its content (an assistant's stripped), then its tool calls as JSON."""
    content = m.get("content")
    text = content if isinstance(content, str) else ""
    calls = [json.dumps({"name": (c.get("function") or {}).get("name"), "arguments": (c.get("function") or {})
              .get("arguments")}) for c in m.get("tool_calls") or []]  # fmt: skip
    return "\n".join(filter(None, [text.strip() if m.get("role") == "assistant" else text, *calls]))


def chatml(messages: list[dict], tools: list[dict]) -> str:
    """The ChatML prompt of a call, ending with the assistant's turn to write."""
    head = f"<|im_start|>tools\n{json.dumps(tools)}<|im_end|>\n" if tools else ""
    body = "".join(f"<|im_start|>{m.get('role')}\n{chatml_text(m)}<|im_end|>\n" for m in messages)
    return head + body + "<|im_start|>assistant\n"


def token_fields(messages: list[dict], tools: list[dict], wire: dict, finish: str) -> tuple[list[int], dict]:
    """(prompt_token_ids, the choice's token_ids and logprobs) as vLLM returns them with return_token_ids, from
    a byte tokenizer of a ChatML prompt: the reply's text and its end token (none when cut by length).
    Rendered again, the history extends the last prompt unless the text changes (stripped spaces)."""
    prompt = list(chatml(messages, tools).encode())
    completion = list(chatml_text(wire).encode()) + ([] if finish == "length" else [END_ID])
    content = [{"token": str(t), "logprob": LOGPROB, "bytes": [t] if t < 256 else [], "top_logprobs": []}
               for t in completion]  # fmt: skip
    return prompt, {"token_ids": completion, "logprobs": {"content": content}}


def finish_reason(step: dict) -> str:
    return step.get("finish_reason") or ("tool_calls" if step.get("tool_calls") else "stop")


def usage(step: dict, messages: list[dict], wire: dict) -> dict:
    """OpenAI usage: about 4 characters a token for prompt and reply, unless the step says otherwise."""
    prompt_tokens = sum(len(str(m.get("content") or "")) for m in messages) // 4 + 1
    completion_tokens = len(json.dumps(wire)) // 4 + 1
    out = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        **(step.get("usage") or {}),
    }
    if step.get("cost") is not None:
        out["cost"] = step["cost"]
    return out


# -- images: what the scripted model "sees" and draws --------------------------------------------------


def png_bytes(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid-colour RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = (b"\x00" + bytes(rgb) * width) * height
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def describe_image(data: bytes) -> str:
    """What the scripted model 'sees' in an image: type, pixel size (PNG), bytes and sha256 prefix."""
    digest = hashlib.sha256(data).hexdigest()[:12]
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return f"image/png {w}x{h} ({len(data)} bytes, sha256 {digest})"
    return f"image ({len(data)} bytes, sha256 {digest})"


def images_in_last_user(messages: list[dict]) -> list[bytes]:
    users = [m for m in messages if m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    out = []
    for part in content if isinstance(content, list) else []:
        url = (part.get("image_url") or {}).get("url", "") if part.get("type") == "image_url" else ""
        if url.startswith("data:") and "," in url:
            out.append(base64.b64decode(url.split(",", 1)[1]))
    return out
