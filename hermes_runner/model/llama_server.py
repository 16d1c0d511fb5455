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

Every reply carries its token ids the way vLLM returns them with ``return_token_ids``: ``prompt_token_ids``
(the prompt llama.cpp evaluated) and the choice's ``token_ids`` (every sampled token, the stop token
included); with ``logprobs: true``, the choice's ``logprobs.content[].logprob`` are those tokens' log
probabilities under the model's raw distribution (before temperature, penalties and the grammar).
"""

from __future__ import annotations

import inspect
import json
import math
import re
import time
import uuid
from collections.abc import Iterator

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


def assistant_text(m: dict) -> str:
    """An assistant message as the prompt shows it: its text, then one <tool_call> block per call."""
    parts = [_text(m.get("content")).strip()]
    for call in m.get("tool_calls") or []:
        fn = call.get("function") or {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except json.JSONDecodeError:
            args = fn.get("arguments")
        body = json.dumps({"name": fn.get("name"), "arguments": args}, ensure_ascii=False)
        parts.append(f"<tool_call>\n{body}\n</tool_call>")
    return "\n".join(p for p in parts if p)


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
            out.append(_turn("assistant", assistant_text(m)))
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


class TokenTap:
    """Records the tokens of one completion: wraps `llama.generate` (the server runs one request at a time)."""

    def __init__(self, llama, logprobs: bool):
        self.llama, self.want_logprobs = llama, logprobs
        self.prompt: list[int] = []
        self.completion: list[int] = []
        self.logprobs: list[float] = []

    def __enter__(self) -> TokenTap:
        self.inner = self.llama.generate
        self.llama.generate = self.generate  # (an instance attribute: the class's method stays as it is)
        return self

    def __exit__(self, *exc: object) -> None:
        del self.llama.generate

    def generate(self, tokens, *args, **kw) -> Iterator[int]:
        self.prompt = [int(t) for t in tokens]
        for token in self.inner(tokens, *args, **kw):
            self.completion.append(int(token))
            if self.want_logprobs:  # the logits it was sampled from: the last evaluated position's
                self.logprobs.append(self._logprob(int(token)))
            yield token

    def _logprob(self, token: int) -> float:
        import numpy as np

        n_vocab = self.llama.n_vocab()
        logits = np.ctypeslib.as_array(self.llama._ctx.get_logits_ith(-1), shape=(n_vocab,))
        top = float(logits.max())
        return float(logits[token]) - top - math.log(float(np.exp(logits - top).sum()))

    def fields(self) -> tuple[list[int], dict]:
        """(prompt_token_ids, the choice's token_ids and logprobs) in vLLM's shape."""
        choice: dict = {"token_ids": self.completion}
        if self.want_logprobs:
            choice["logprobs"] = {
                "content": [
                    {"token": self.llama.detokenize([t]).decode("utf-8", "replace"), "logprob": lp, "top_logprobs": []}
                    for t, lp in zip(self.completion, self.logprobs, strict=True)
                ]
            }
        return self.prompt, choice


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
    with TokenTap(llama, bool(kw.get("logprobs"))) as tap:
        done = llama.create_completion(
            prompt=prompt, grammar=LlamaGrammar.from_string(gbnf, verbose=False) if gbnf else None, **args
        )
    choice = done["choices"][0]
    content, calls = parse(choice["text"]) if tools else (choice["text"], [])
    message: dict = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    prompt_ids, token_fields = tap.fields()
    return {
        "id": "chat" + done["id"],
        "object": "chat.completion",
        "created": done.get("created", int(time.time())),
        "model": done["model"],
        "prompt_token_ids": prompt_ids,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else choice.get("finish_reason") or "stop",
                **token_fields,
            }
        ],
        "usage": done["usage"],
    }


def served(llama, **kw):
    """The handler as the server calls it: its reply as a JSONResponse, which FastAPI passes on whole (the
    route's response model, a TypedDict, would drop the fields vLLM adds: prompt_token_ids, token_ids)."""
    from starlette.responses import JSONResponse

    return JSONResponse(handler(llama, **kw))


def main() -> None:
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry
    from llama_cpp.server.__main__ import main as serve

    LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(FORMAT, served, overwrite=True)
    serve()


if __name__ == "__main__":
    main()
