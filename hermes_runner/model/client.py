"""Chat model client: the official `openai` SDK on its aiohttp transport, retries through `tenacity` only
(model/retry.py); a streamed reply is added up by model/stream.py."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from enum import Enum

import httpx2
import openai
from tenacity import RetryCallState

from hermes_runner.config import ModelConfig, ProviderConfig, ReasoningApi, ReasoningConfig
from hermes_runner.errors import (
    BrokenStream,
    ConfigError,
    EmptyResponse,
    EndpointAuthError,
    EndpointDown,
    EndpointRefused,
    MalformedReply,
    ModelCallError,
)
from hermes_runner.model.base import CallHook, ChatModel, Completion, TurnTokens  # noqa: F401  (re-exported)
from hermes_runner.model.reasoning import split_reasoning
from hermes_runner.model.retry import connection_refused, retrying
from hermes_runner.model.stream import StreamAccumulator
from hermes_runner.usage import Usage, fill_cost
from hermes_runner.util import fastjson
from hermes_runner.util.text import first_line

CHAT_PATH = "/chat/completions"

log = logging.getLogger(__name__)

AUTH_STATUS = {401, 403}  # the credentials are refused: no prompt can run (a 403 for flagged input is not this)


def is_auth_error(exc: BaseException) -> bool:
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in AUTH_STATUS:
        return False
    text = str(exc).lower()
    return not (exc.status_code == 403 and ("moderation" in text or "flagged" in text))


def _normalize_tool_calls(raw: list | None) -> list[dict]:
    calls = []
    for i, call in enumerate(raw or []):
        fn = call.get("function") or {}
        args = fn.get("arguments")
        if args is None:
            args = ""
        elif not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        calls.append(
            {
                "id": call.get("id") or f"call_{i}",
                "type": "function",
                "function": {"name": fn.get("name") or "", "arguments": args},
            }
        )
    return calls


# Asked for with output.tokens: vLLM's fields (SGLang and the embedded llama.cpp server answer them the same way).
TOKEN_REQUEST = {"return_token_ids": True, "logprobs": True}


def parse_tokens(body: dict, choice: dict) -> TurnTokens | None:
    """The call's token ids and logprobs: `prompt_token_ids` (the body's, or the choice's), the choice's
    `token_ids` and `logprobs.content[].logprob`; None when the endpoint returned no ids."""
    prompt, completion = body.get("prompt_token_ids") or choice.get("prompt_token_ids"), choice.get("token_ids")
    if not isinstance(prompt, list) or not isinstance(completion, list):
        return None
    if not {*map(type, prompt), *map(type, completion)} <= {int}:  # (at C speed: a prompt has thousands)
        raise MalformedReply(f"token ids that are not integers: {json.dumps(completion)[:200]}")
    content = (choice.get("logprobs") or {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
    logprobs = [float(t["logprob"]) for t in content] if isinstance(content, list) else None
    if logprobs is not None and len(logprobs) != len(completion):
        logprobs = None  # (an engine that leaves the stop token out of one of them: ids are kept, logprobs not)
    return TurnTokens(prompt, completion, logprobs)


def parse_completion(body: dict) -> Completion:
    if not isinstance(body, dict):
        raise MalformedReply(f"reply is a JSON {type(body).__name__}, not an object: {json.dumps(body)[:300]}")
    choices = body.get("choices")
    if not choices:
        raise EmptyResponse(f"response without choices: {json.dumps(body)[:300]}")
    choice = choices[0] if isinstance(choices, list) else None
    raw = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(raw, dict):
        raise MalformedReply(f"reply without a message object: {json.dumps(body)[:300]}")
    reasoning, content = split_reasoning(raw)
    msg: dict = {"role": "assistant", "content": content}
    calls = _normalize_tool_calls(raw.get("tool_calls"))
    if calls:
        msg["tool_calls"] = calls
    if reasoning:
        msg["reasoning"] = reasoning
    if raw.get("reasoning_details"):
        msg["reasoning_details"] = raw["reasoning_details"]
    usage = Usage.from_openai(body.get("usage"))
    answered_by = body.get("model")
    return Completion(
        msg,
        choice.get("finish_reason"),
        usage,
        model=answered_by if isinstance(answered_by, str) else "",
        tokens=parse_tokens(body, choice),
    )


def api_message(msg: dict) -> dict:
    """A history message as sent to the endpoint (our own bookkeeping fields removed)."""
    if msg["role"] != "assistant":
        return msg
    out = {"role": "assistant", "content": msg.get("content") or ""}
    if msg.get("tool_calls"):
        out["tool_calls"] = msg["tool_calls"]
    if msg.get("reasoning_details"):
        out["reasoning_details"] = msg["reasoning_details"]  # signed blocks go back unchanged
    return out


def request_extras(
    model: ModelConfig, provider: ProviderConfig, reasoning: ReasoningConfig, max_tokens: int | None
) -> tuple[dict, dict]:
    """Build (keyword params, extra_body) sent with every call."""
    params: dict = {}
    extra = dict(model.extra_body or {})
    routing = {}
    for name in ("only", "ignore", "order", "sort", "allow_fallbacks", "require_parameters", "data_collection"):
        value = getattr(provider, name)
        if value is not None:
            routing[name] = (
                value.value if isinstance(value, Enum) else list(value) if isinstance(value, list) else value
            )
    if routing:
        extra["provider"] = routing
    effort = reasoning.effort.value if reasoning.effort is not None else None
    if reasoning.enabled is False:
        effort = "none"
    api = model.reasoning_api
    if api in (ReasoningApi.openrouter, ReasoningApi.both):
        obj: dict = {}
        if reasoning.enabled is False:
            obj["effort"] = "none"
        else:
            if reasoning.enabled is True:
                obj["enabled"] = True
            if effort:
                obj["effort"] = effort
            if reasoning.max_tokens is not None:
                obj["max_tokens"] = reasoning.max_tokens
        if reasoning.exclude is not None:
            obj["exclude"] = reasoning.exclude
        if obj:
            extra["reasoning"] = obj
    if api in (ReasoningApi.openai, ReasoningApi.both) and effort:
        params["reasoning_effort"] = effort
    if max_tokens is not None:
        params[model.max_tokens_param] = max_tokens
    if model.temperature is not None:
        params["temperature"] = model.temperature
    return params, extra


def resolve_api_key(model: ModelConfig) -> str:
    """Read the key from the named environment variable; never from config."""
    if not model.api_key_env:
        return "no-key"  # local servers take any key; the SDK insists on one
    key = os.environ.get(model.api_key_env)
    if not key:
        raise ConfigError(
            f"model {model.name!r} needs an API key in the environment variable {model.api_key_env}, "
            "which is not set (export it, or set model.api_key_env=null for a server without keys)"
        )
    return key


def openai_client(cfg: ModelConfig, base_url: str | None = None, pool_size: int = 100) -> openai.AsyncOpenAI:
    """The SDK client of an endpoint, for every call: one aiohttp keep-alive pool, no retries below tenacity's."""
    pool = httpx2.Limits(max_connections=pool_size + 16, max_keepalive_connections=pool_size + 16)
    return openai.AsyncOpenAI(
        api_key=resolve_api_key(cfg),
        base_url=base_url or cfg.base_url,
        max_retries=0,
        timeout=cfg.timeout_s,
        default_headers=dict(cfg.default_headers or {}) or None,
        http_client=openai.DefaultAioHttpClient(limits=pool),
    )


class OpenAIChatModel:
    """Any OpenAI-compatible chat-completions endpoint, through one shared connection pool."""

    def __init__(
        self,
        model: ModelConfig,
        provider: ProviderConfig,
        reasoning: ReasoningConfig,
        max_tokens: int | None = None,
        pool_size: int = 100,
        base_url: str | None = None,
        hooks: Sequence[CallHook] = (),
        tokens: bool = False,
        refused_pauses: bool = False,
    ):
        self.cfg = model
        self._params, self._extra = request_extras(model, provider, reasoning, max_tokens)
        if tokens:  # output.tokens: the engine's token ids and logprobs of every call (extra_body still wins)
            self._extra = {**TOKEN_REQUEST, **self._extra}
        self.client = openai_client(model, base_url, pool_size)
        # Call meters, e.g. a rate limiter or a budget: `await before_call(estimated_tokens)`, `after_call(exc, completion)`.
        self.hooks = list(hooks)
        # Open once the endpoint refuses connections or credentials: every later call fails at once with it.
        self.down: EndpointDown | None = None
        # The circuit breaker counts provider errors (run/breaker.py): a connection refused after the endpoint
        # has answered a call is an outage it waits out (a provider error), not an endpoint that was never there.
        self.refused_pauses = refused_pauses
        self.answered = False

    def request_body(self, messages: list[dict], tools: list[dict]) -> dict:
        """The JSON body of one chat-completions call (extra_body last, so it wins, as in the SDK)."""
        body: dict = {"model": self.cfg.name, "messages": [api_message(m) for m in messages], **self._params}
        if tools:
            body["tools"] = tools
            if self.cfg.tool_choice and self._forces_tools(messages):
                body["tool_choice"] = self.cfg.tool_choice
        if self.cfg.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        body.update(self._extra)
        return body

    def _forces_tools(self, messages: list[dict]) -> bool:
        """Whether tool_choice applies to this call (`tool_choice_turns` limits it to the first calls)."""
        if self.cfg.tool_choice_turns is None:
            return True
        return sum(m["role"] == "assistant" for m in messages) < self.cfg.tool_choice_turns

    async def _post(self, content: bytes) -> Completion:
        """One call through the SDK's raw request path (no per-call params models); a stream is added up."""
        if not self.cfg.stream:
            raw = await self.client.post(CHAT_PATH, cast_to=httpx2.Response, content=content)
            try:
                body = fastjson.loads(raw.content)
            except ValueError as exc:
                raise MalformedReply(f"reply is not JSON ({exc}): {raw.content[:200]!r}") from None
            return parse_completion(body)
        acc = StreamAccumulator()
        stream = await self.client.post(
            CHAT_PATH, cast_to=dict, content=content, stream=True, stream_cls=openai.AsyncStream[dict]
        )
        try:
            async for chunk in stream:
                if isinstance(chunk, dict):
                    acc.add(chunk)
                else:
                    raise BrokenStream(f"unexpected stream chunk: {str(chunk)[:200]}")
        except (openai.APIStatusError, openai.APIConnectionError):
            raise
        except openai.APIError as exc:  # an error event inside the stream
            code = exc.body.get("code") if isinstance(exc.body, dict) else None
            raise BrokenStream(f"error in the stream: {exc.message}", code if isinstance(code, int) else None) from exc
        except ValueError as exc:
            raise BrokenStream(f"unreadable stream chunk: {exc}") from exc
        finally:
            await stream.close()
        return parse_completion(acc.body())

    async def complete(self, messages: list[dict], tools: list[dict]) -> Completion:
        if self.down is not None:
            raise type(self.down)(str(self.down), self.down.status)
        content = fastjson.dumps(self.request_body(messages, tools))  # once, for every attempt
        retries = -1
        estimate = sum(len(str(m.get("content") or "")) for m in messages) / 4 + 1
        try:
            async for attempt in retrying(self.cfg, self._refused_long_enough, self._before_sleep):
                with attempt:
                    retries += 1
                    for h in self.hooks:
                        await h.before_call(estimate)
                    try:
                        completion = await self._post(content)
                    except BaseException as exc:
                        for h in self.hooks:
                            h.after_call(exc, None)
                        raise
                    fill_cost(completion.usage, self.cfg.price)  # before the meters see it
                    for h in self.hooks:
                        h.after_call(None, completion)
        except openai.APIStatusError as exc:
            if is_auth_error(exc):
                key = f" (the key in ${self.cfg.api_key_env})" if self.cfg.api_key_env else ""
                self.down = EndpointAuthError(
                    f"{self.client.base_url} refused the credentials{key}: {_describe(exc, retries)}", exc.status_code
                )
                raise type(self.down)(str(self.down), exc.status_code) from exc
            raise ModelCallError(_describe(exc, retries), exc.status_code) from exc
        except (openai.APIConnectionError, EmptyResponse, MalformedReply, BrokenStream) as exc:
            if connection_refused(exc):
                tail = f" ({retries} retries)" if retries else ""
                if self.refused_pauses and self.answered:
                    raise ModelCallError(
                        f"connection refused by {self.client.base_url}{tail}, which answered earlier calls"
                    ) from exc
                self.down = EndpointRefused(
                    f"connection refused by {self.client.base_url}{tail}: is the server running, is the URL right?"
                )
                raise type(self.down)(str(self.down)) from exc
            raise ModelCallError(_describe(exc, retries)) from exc
        completion.retries = retries
        self.answered = True
        return completion

    def _refused_long_enough(self, state: RetryCallState) -> bool:
        """Stop retrying a refused connection after `model.refused_retries` retries (not `max_retries`)."""
        exc = state.outcome.exception() if state.outcome else None
        return connection_refused(exc) and state.attempt_number > self.cfg.refused_retries

    def _before_sleep(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0
        log.debug("model call failed (%s); retry %d in %.2fs", _short(exc), state.attempt_number, wait)
        for h in self.hooks:
            h.on_retry(exc)

    async def aclose(self) -> None:
        await self.client.close()


def _short(exc: BaseException | None) -> str:
    if connection_refused(exc):
        return "connection refused"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    return type(exc).__name__ if exc else "?"


def _describe(exc: BaseException, retries: int) -> str:
    tail = f" after {retries} retries" if retries else ""
    return f"{_short(exc)}{tail}: {first_line(exc)}"
