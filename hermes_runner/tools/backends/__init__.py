"""Backends of the optional toolsets: what each needs, the start-up report, and the per-run services.

The ground floor of `tools/`: it never imports the rest of `tools/` (only model/ and vocabulary)."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hermes_runner.config import (
    DistributionConfig,
    ImageGenConfig,
    MoaConfig,
    ModelConfig,
    ToolsConfig,
    UnavailablePolicy,
    VisionConfig,
    WebConfig,
)
from hermes_runner.errors import ConfigError
from hermes_runner.model.base import CallHook, ChatModel
from hermes_runner.tools.backends import endpoints, search
from hermes_runner.tools.backends.fetch import Fetcher

log = logging.getLogger(__name__)

EXTRA_HINT = "pip install 'hermes-runner[tools]'"


@dataclass
class WebService:
    search: search.SearchBackend
    fetcher: Fetcher
    cfg: WebConfig


@dataclass
class VisionService:
    model: ChatModel
    fetcher: Fetcher
    cfg: VisionConfig


@dataclass
class ImageGenService:
    endpoint: endpoints.ImageEndpoint
    fetcher: Fetcher
    cfg: ImageGenConfig


@dataclass
class MoaService:
    references: list[tuple[str, ChatModel]]  # (label, model)
    aggregator: tuple[str, ChatModel]
    cfg: MoaConfig


def _modules(*names: str) -> str | None:
    gone = [n for n in names if importlib.util.find_spec(n) is None]
    return f"Python package(s) {', '.join(gone)} not installed ({EXTRA_HINT})" if gone else None


def missing_backend(toolset: str, t: ToolsConfig, model: ModelConfig) -> str | None:
    """Why `toolset` cannot run with these options and environment (None: it can)."""
    if toolset == "web":
        return search.missing(t.web) or _modules("trafilatura", "pypdf")
    if toolset == "vision":
        return endpoints.missing(t.vision.endpoint, model, "tools.vision.endpoint")
    if toolset == "image_gen":
        return endpoints.missing(t.image_gen.endpoint, model, "tools.image_gen.endpoint")
    if toolset == "moa":
        if not t.moa.reference_models:
            return "tools.moa.reference_models is empty"
        for i, ep in enumerate(t.moa.reference_models):
            if why := endpoints.missing(ep, model, f"tools.moa.reference_models[{i}]"):
                return why
        return endpoints.missing(t.moa.aggregator, model, "tools.moa.aggregator")
    if toolset == "browser":
        from hermes_runner.tools.backends.browser import find_chromium

        if why := _modules("playwright"):
            return why
        if find_chromium(t.browser) is None:
            where = t.browser.executable or "chromium on PATH"
            return f"no Chromium executable ({where}); install Debian's chromium or set tools.browser.executable"
    return None


def drawable(distribution: DistributionConfig) -> list[str]:
    """Toolsets the distribution can draw."""
    return [name for name, p in distribution.toolsets.items() if p > 0]


def unavailable(tools: ToolsConfig, model: ModelConfig, distribution: DistributionConfig) -> dict[str, str]:
    """{toolset: what is missing} for the distribution's toolsets."""
    return {ts: why for ts in drawable(distribution) if (why := missing_backend(ts, tools, model))}


def check_toolsets(tools: ToolsConfig, model: ModelConfig, distribution: DistributionConfig) -> dict[str, str]:
    """Report unconfigured toolsets at start; refuse the run or return the ones to drop."""
    missing = unavailable(tools, model, distribution)
    if not missing:
        return {}
    lines = "\n  ".join(f"{ts}: {why}" for ts, why in missing.items())
    head = f"distribution {distribution.name!r} names toolsets whose backend is not configured:\n  {lines}\n"
    if set(missing) == set(drawable(distribution)):
        raise ConfigError(
            head
            + "None of its toolsets is left: configure them (hermes_runner/conf/tools/default.yaml) or pick another distribution."
        )
    if tools.unavailable == UnavailablePolicy.refuse:
        raise ConfigError(
            head + "Configure them (hermes_runner/conf/tools/default.yaml), pick another distribution, "
            "or set tools.unavailable=drop to run without them."
        )
    log.warning("%sThey are dropped from every prompt (tools.unavailable=drop; =refuse stops instead).", head)
    return missing


class ToolServices:
    """The backends of one run's toolsets; `by_toolset` is what every ToolContext gets."""

    def __init__(
        self, t: ToolsConfig, main: ModelConfig, toolsets: Iterable[str], main_url: str | None = None,
        hooks: Sequence[CallHook] = (), pool: int = 4,
    ):  # fmt: skip
        """`main`: the run's model; `hooks` meter the calls of the tools' chat models (budget), `pool`: connections."""
        wanted = set(toolsets)
        self.by_toolset: dict[str, Any] = {}
        self._closers: list = []
        fetcher: Fetcher | None = None
        if wanted & {"web", "vision", "image_gen"}:
            fetcher = Fetcher(t.fetch, t.allow_private_urls)
            self._closers.append(fetcher.aclose)
        if "web" in wanted:
            backend = search.make_search(t.web, t.fetch.user_agent)
            self._closers.append(backend.aclose)
            self.by_toolset["web"] = WebService(backend, fetcher, t.web)
        if "code_execution" in wanted:
            self.by_toolset["code_execution"] = t.code_execution
        if "vision" in wanted:
            model = endpoints.chat_model(t.vision.endpoint, main, main_url, pool, hooks)
            self._closers.append(model.aclose)
            self.by_toolset["vision"] = VisionService(model, fetcher, t.vision)
        if "image_gen" in wanted:
            ep = endpoints.ImageEndpoint(t.image_gen.endpoint, main, main_url)
            self._closers.append(ep.aclose)
            self.by_toolset["image_gen"] = ImageGenService(ep, fetcher, t.image_gen)
        if "moa" in wanted:
            refs = []
            for ep in t.moa.reference_models:
                model = endpoints.chat_model(ep, main, main_url, pool, hooks)
                self._closers.append(model.aclose)
                refs.append((ep.model, model))
            agg = endpoints.chat_model(t.moa.aggregator, main, main_url, pool, hooks)
            self._closers.append(agg.aclose)
            self.by_toolset["moa"] = MoaService(refs, (t.moa.aggregator.model, agg), t.moa)
        if "browser" in wanted:
            from hermes_runner.tools.backends.browser import BrowserService

            browser = BrowserService(t.browser, t.allow_private_urls)
            self._closers.append(browser.aclose)
            self.by_toolset["browser"] = browser

    async def aclose(self) -> None:
        for close in reversed(self._closers):
            try:
                await close()
            except Exception:
                log.warning("closing a tool backend failed", exc_info=True)
        self._closers.clear()
