"""OpenAI-compatible endpoints used by tools: chat models (vision, MoA) and image generation."""

from __future__ import annotations

import os
from collections.abc import Sequence

import openai

from hermes_runner.config import EndpointConfig, ModelConfig, ProviderConfig, ReasoningApi, ReasoningConfig
from hermes_runner.errors import ToolError
from hermes_runner.model.base import CallHook
from hermes_runner.model.client import OpenAIChatModel, openai_client
from hermes_runner.model.retry import retrying
from hermes_runner.util.text import first_line


def model_config(ep: EndpointConfig, main: ModelConfig, main_url: str | None = None) -> ModelConfig:
    """The endpoint as a ModelConfig; without its own base_url it is the run's model endpoint (and key)."""
    own = bool(ep.base_url)
    return ModelConfig(
        name=ep.model or "",
        base_url=ep.base_url if own else (main_url or main.base_url),
        api_key_env=ep.api_key_env if own else main.api_key_env,
        reasoning_api=ReasoningApi.none,
        temperature=ep.temperature,
        timeout_s=ep.timeout_s,
        max_retries=ep.max_retries,
        extra_body=dict(ep.extra_body or {}),
        default_headers={} if own else dict(main.default_headers or {}),
    )


def missing(ep: EndpointConfig, main: ModelConfig, where: str) -> str | None:
    """Why this endpoint cannot be used (None: it can)."""
    if not ep.model:
        return f"{where}.model is not set"
    mc = model_config(ep, main)
    if mc.api_key_env and not os.environ.get(mc.api_key_env):
        return f"the environment variable {mc.api_key_env} (API key of {where}) is not set"
    return None


def chat_model(
    ep: EndpointConfig, main: ModelConfig, main_url: str | None, pool_size: int, hooks: Sequence[CallHook] = ()
) -> OpenAIChatModel:
    mc = model_config(ep, main, main_url)
    return OpenAIChatModel(mc, ProviderConfig(), ReasoningConfig(), ep.max_tokens, pool_size=pool_size, hooks=hooks)


class ImageEndpoint:
    """POST /images/generations, retried like chat calls."""

    def __init__(self, ep: EndpointConfig, main: ModelConfig, main_url: str | None):
        self.cfg = model_config(ep, main, main_url)
        self._client = openai_client(self.cfg, pool_size=8)

    async def generate(self, prompt: str, **params) -> list[dict]:
        """Images as dicts with `b64_json` or `url` (and maybe `revised_prompt`)."""
        kwargs = {k: v for k, v in params.items() if v is not None}
        if self.cfg.extra_body:
            kwargs["extra_body"] = self.cfg.extra_body
        try:
            async for attempt in retrying(self.cfg):
                with attempt:
                    resp = await self._client.images.generate(model=self.cfg.name, prompt=prompt, n=1, **kwargs)
        except openai.APIStatusError as exc:
            raise ToolError(f"image endpoint answered HTTP {exc.status_code}: {first_line(exc)}") from None
        except openai.APIConnectionError as exc:
            raise ToolError(f"image endpoint unreachable: {first_line(exc)}") from None
        return [d.model_dump(exclude_none=True) for d in (resp.data or [])]

    async def aclose(self) -> None:
        await self._client.close()
