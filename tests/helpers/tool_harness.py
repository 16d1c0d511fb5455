"""Run tools directly against real services: a local sandbox, the scripted model server, a local site."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from hermes_runner.config.root import RunConfig
from hermes_runner.dataset import Prompt
from hermes_runner.sandbox.local.backend import LocalBackend
from hermes_runner.testing.scripted_server import ScriptedServer
from hermes_runner.tools.backends import ToolServices
from hermes_runner.tools.base import ToolContext, ToolResult
from hermes_runner.tools.catalog import all_tools

from tests.helpers.local_site import LocalSite
from tests.helpers.run import base_overrides, compose_cfg


def tool_overrides(site: LocalSite) -> list[str]:
    """Every toolset configured against local services (models on the scripted server)."""
    return [
        "tools.allow_private_urls=true",
        "tools.web.search_backend=searxng",
        f"tools.web.searxng.url={site.url('')}",
        "tools.vision.endpoint.model=vision-test",
        "tools.image_gen.endpoint.model=image-test",
        "tools.moa.reference_models=[{model:ref-a},{model:ref-b}]",
        "tools.moa.aggregator.model=agg",
    ]


def make_tools_cfg(server: ScriptedServer, site: LocalSite, tmp_path: Path, *overrides: str) -> RunConfig:
    return compose_cfg(
        base_overrides(server, tmp_path)
        + ["run_name=t", "dataset_file=unused.jsonl"]
        + tool_overrides(site)
        + list(overrides)
    )


async def call(ctx: ToolContext, name: str, **args: Any) -> tuple[dict, bool]:
    """Call a tool as the agent does (ToolErrors become error results): (parsed result, ok)."""
    from hermes_runner.errors import ToolError

    try:
        res: ToolResult = await all_tools()[name].run(ctx, args)
    except ToolError as exc:
        res = ToolResult.error(str(exc))
    return json.loads(res.content), res.ok


def run_tools(cfg: RunConfig, toolsets: list[str], body: Callable[..., Awaitable[Any]], tasks: int = 1) -> Any:
    """Run `body(ctx, ...)` with `tasks` task contexts (each its own sandbox), then end them as a session does."""

    async def main() -> Any:
        backend = LocalBackend(cfg.sandbox, "tooltest")
        await backend.start(set())
        services = ToolServices(cfg.tools, cfg.model, toolsets, pool=max(4, cfg.num_workers))
        ctxs = []
        try:
            for i in range(tasks):
                sandbox = await backend.create(Prompt(i, f"k{i}", "p"))
                ctxs.append(ToolContext(sandbox, services=services.by_toolset))
            return await body(*ctxs)
        finally:
            for ctx in ctxs:
                await ctx.aclose()
                await ctx.sandbox.close()
            await services.aclose()
            await backend.shutdown()

    return asyncio.run(main())
