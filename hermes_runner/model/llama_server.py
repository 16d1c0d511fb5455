"""llama.cpp's OpenAI-compatible server with Hermes-style tool calling, for ChatML GGUF models.

    python -m hermes_runner.model.llama_server --model m.gguf --chat_format hermes-tools [llama_cpp.server options]

Registers the chat format ``hermes-tools`` and runs ``llama_cpp.server``. The prompt is ChatML
with the offered tools listed in the system turn; the model calls them as
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` and sees results inside
``<tool_response>`` (the format of the trajectories this project writes). A grammar built from
the request's tool schemas makes every call valid JSON for an offered tool, ``tool_choice``
(auto | required | none | a named function) is honoured, and ``max_tokens`` bounds every reply.
A reply holds one call at most: small models otherwise repeat the same call until max_tokens.
(llama-cpp-python's own ``chatml-function-calling`` ignores ``max_tokens`` while writing a call,
leaves tool results out of the prompt and never returns a final answer's text.)
"""

from __future__ import annotations

import inspect
import json
import re
import time
import uuid

FORMAT = "hermes-tools"
TOOL_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)

TOOLS_PREAMBLE = (
    "You can call functions to help with the user's request. Their JSON signatures are inside "
    "<tools></tools>:\n<tools>\n{tools}\n</tools>\n"
    "To call functions, reply only with one block per call:\n"
    '<tool_call>\n{{"name": <function-name>, "arguments": <arguments-object>}}\n</tool_call>\n'
    "Each result comes back inside <tool_response></tool_response>. "
    "When you have what you need, reply with your answer in plain text."
)


def _text(content: object) -> str:
    """Message content as text (a list of parts keeps its text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def _turn(role: str, text: str) -> str:
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


def render(messages: list[dict], tools: list[dict] | None) -> str:
    """The ChatML prompt, ending with the assistant's turn to write."""
    system = "\n\n".join(_text(m.get("content")) for m in messages if m.get("role") == "system")
    if tools:
        listed = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
        system = "\n\n".join(filter(None, [system, TOOLS_PREAMBLE.format(tools=listed)]))
    out = [_turn("system", system)] if system else []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            parts = [_text(m.get("content")).strip()]
            for call in m.get("tool_calls") or []:
                fn = call.get("function") or {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except json.JSONDecodeError:
                    args = fn.get("arguments")
                body = json.dumps({"name": fn.get("name"), "arguments": args}, ensure_ascii=False)
                parts.append(f"<tool_call>\n{body}\n</tool_call>")
            out.append(_turn("assistant", "\n".join(p for p in parts if p)))
        elif role == "tool":
            out.append(_turn("tool", f"<tool_response>\n{_text(m.get('content'))}\n</tool_response>"))
        elif role in ("user", "function"):
            out.append(_turn("user", _text(m.get("content"))))
    return "".join(out) + "<|im_start|>assistant\n"


def _call_schema(tool: dict) -> dict:
    fn = tool["function"]
    params = dict(fn.get("parameters") or {"type": "object", "properties": {}})
    if params.get("type") == "object":
        params.setdefault("additionalProperties", False)  # no invented keys
    return {
        "type": "object",
        "properties": {"name": {"const": fn["name"]}, "arguments": params},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def grammar_text(tools: list[dict] | None, tool_choice: object) -> str | None:
    """GBNF for the reply: tool calls valid for the offered tools and/or a plain answer; None: free text."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    if not tools:
        return None
    if isinstance(tool_choice, dict):  # {"type": "function", "function": {"name": ...}}
        name = (tool_choice.get("function") or {}).get("name")
        tools = [t for t in tools if t["function"]["name"] == name]
        if not tools:
            raise ValueError(f"tool_choice names a function that is not offered: {name!r}")
    answer = "hermes-answer ::= [^<] [^\\x00]*\n"
    if tool_choice == "none":
        return "root ::= hermes-answer\n" + answer
    schema = {"oneOf": [_call_schema(t) for t in tools]}
    body = re.sub(
        r"^root ::=", "hermes-call-json ::=", json_schema_to_gbnf(json.dumps(schema)), count=1, flags=re.MULTILINE
    )
    call = 'hermes-call ::= "<tool_call>\\n" hermes-call-json "\\n</tool_call>"\n'
    if tool_choice == "auto" or tool_choice is None:
        return "root ::= hermes-call | hermes-answer\n" + call + answer + body
    return "root ::= hermes-call\n" + call + body  # "required" or a named function


def parse(text: str) -> tuple[str | None, list[dict]]:
    """(content, tool_calls) of a reply; a call that does not parse (cut by max_tokens) stays in the content."""
    calls, kept = [], text
    for match in TOOL_BLOCK.finditer(text):
        try:
            body = json.loads(match.group(1))
            name, args = body["name"], body.get("arguments", {})
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
            }
        )
        kept = kept.replace(match.group(0), "", 1)
    content = kept.strip()
    return (content or None), calls


def handler(llama, messages, tools=None, tool_choice=None, functions=None, function_call=None, stream=False, **kw):
    """A llama-cpp-python chat completion handler (see module docstring)."""
    from llama_cpp.llama_grammar import LlamaGrammar

    if stream:
        raise ValueError(f"chat format {FORMAT} does not stream")
    if functions and not tools:  # legacy API
        tools = [{"type": "function", "function": f} for f in functions]
        tool_choice = function_call if isinstance(function_call, str) else tool_choice
    prompt = render(messages, tools if tool_choice != "none" else None)
    gbnf = grammar_text(tools, tool_choice)
    # logprobs are not returned (and need the server's logits_all): not passed on
    accepted = set(inspect.signature(llama.create_completion).parameters) - {
        "prompt",
        "grammar",
        "stream",
        "echo",
        "logprobs",
    }
    args = {k: v for k, v in kw.items() if k in accepted and v is not None}
    # No max_tokens in the request means no limit (the OpenAI API's meaning), not create_completion's 16.
    args["max_tokens"] = kw.get("max_tokens") or -1
    stop = args.get("stop") or []
    args["stop"] = [*([stop] if isinstance(stop, str) else stop), "<|im_end|>"]
    done = llama.create_completion(
        prompt=prompt, grammar=LlamaGrammar.from_string(gbnf, verbose=False) if gbnf else None, **args
    )
    choice = done["choices"][0]
    content, calls = parse(choice["text"]) if tools else (choice["text"], [])
    message: dict = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chat" + done["id"],
        "object": "chat.completion",
        "created": done.get("created", int(time.time())),
        "model": done["model"],
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else choice.get("finish_reason") or "stop",
            }
        ],
        "usage": done["usage"],
    }


def main() -> None:
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry
    from llama_cpp.server.__main__ import main as serve

    LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(FORMAT, handler, overwrite=True)
    serve()


if __name__ == "__main__":
    main()
