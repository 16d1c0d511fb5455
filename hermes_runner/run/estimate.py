"""The dry run: validate everything, probe the endpoint once, and estimate calls, tokens and cost."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import openai

from hermes_runner.config.root import RunConfig
from hermes_runner.errors import ConfigError
from hermes_runner.model.client import OpenAIChatModel
from hermes_runner.model.retry import connection_refused
from hermes_runner.model.serve import serving
from hermes_runner.run.plan import Plan
from hermes_runner.rundir.stats import RunStats
from hermes_runner.rundir.store import LedgerState
from hermes_runner.sandbox import make_backend
from hermes_runner.tools.catalog import all_tools
from hermes_runner.usage import Usage, has_prices, price_cost

CHARS_PER_TOKEN = 4
TURN_OUTPUT_TOKENS = 400  # assumed reply size when max_tokens is not set
TOOL_RESULT_TOKENS = 400  # assumed tool output size per turn


@dataclass
class Estimate:
    prompts: int
    calls_low: int
    calls_high: int
    tokens_low: int
    tokens_high: int
    cost_low: float | None
    cost_high: float | None
    observed_cost_per_prompt: float | None = None
    observed_tokens_per_prompt: float | None = None


def estimate(cfg: RunConfig, prompt_chars: int, n_prompts: int, stats: RunStats) -> Estimate:
    """Bounds for the prompts still to run: one call each (low) up to max_turns calls with growing context (high)."""
    schema_chars = len(json.dumps([t.openai_schema() for t in all_tools().values()]))
    base = (len(cfg.system_prompt or "") + len(cfg.ephemeral_system_prompt or "") + schema_chars) // CHARS_PER_TOKEN
    reply = cfg.max_tokens or TURN_OUTPUT_TOKENS
    first_in = n_prompts * base + prompt_chars // CHARS_PER_TOKEN
    low = Usage(prompt_tokens=first_in, completion_tokens=n_prompts * min(reply, 100))
    turns = cfg.max_turns
    # Call i carries the first prompt plus i earlier replies and tool results.
    growth = n_prompts * (reply + TOOL_RESULT_TOKENS) * turns * (turns - 1) // 2
    high = Usage(prompt_tokens=first_in * turns + growth, completion_tokens=n_prompts * reply * turns)
    for u in (low, high):
        u.total_tokens = u.prompt_tokens + u.completion_tokens
    priced = has_prices(cfg.model.price)
    done = stats.ok + sum(stats.discarded.values())
    return Estimate(
        prompts=n_prompts,
        calls_low=n_prompts,
        calls_high=n_prompts * turns,
        tokens_low=low.total_tokens,
        tokens_high=high.total_tokens,
        cost_low=price_cost(low, cfg.model.price) if priced else None,
        cost_high=price_cost(high, cfg.model.price) if priced else None,
        observed_cost_per_prompt=stats.usage.cost_usd / done if done and stats.usage.cost_usd else None,
        observed_tokens_per_prompt=stats.usage.total_tokens / done if done else None,
    )


async def probe(model: OpenAIChatModel) -> str:
    """One cheap request: list the endpoint's models and check ours is there."""
    try:
        listed = await model.client.models.list()
    except openai.AuthenticationError as exc:
        raise ConfigError(f"the endpoint {model.client.base_url} refused the API key: {exc}") from None
    except openai.APIConnectionError as exc:
        why = "connection refused (is the server running, is the URL right?)" if connection_refused(exc) else exc
        raise ConfigError(f"cannot reach the endpoint {model.client.base_url}: {why}") from None
    except openai.APIStatusError as exc:
        return f"endpoint reachable; model list not available (HTTP {exc.status_code})"
    ids = [m.id for m in listed.data]
    if ids and model.cfg.name not in ids:
        shown = ", ".join(ids[:8]) + (" ..." if len(ids) > 8 else "")
        raise ConfigError(f"the endpoint does not list the model {model.cfg.name!r}; it offers: {shown}")
    return f"endpoint reachable, model {model.cfg.name!r} " + ("listed" if ids else "(no model list)")


def describe(e: Estimate) -> str:
    lines = [
        f"to run: {e.prompts} prompts, {e.calls_low:,}-{e.calls_high:,} model calls, "
        f"~{e.tokens_low:,}-{e.tokens_high:,} tokens"
    ]
    if e.cost_low is not None:
        lines.append(f"cost from the price table: ${e.cost_low:.4f}-${e.cost_high:.4f}")
    else:
        lines.append("cost: no price table in the model config (model.price) - tokens only")
    if e.observed_tokens_per_prompt is not None:
        text = f"at this run's average so far: ~{e.observed_tokens_per_prompt * e.prompts:,.0f} tokens"
        if e.observed_cost_per_prompt is not None:
            text += f", ~${e.observed_cost_per_prompt * e.prompts:.4f}"
        lines.append(text)
    return "\n".join(lines)


def batch_plan(cfg: RunConfig, e: Estimate) -> str:
    """Batch mode's plan: rounds (one batch round trip per turn of each wave of sessions) x batches, the hours at
    the provider's stated turnaround, the cost at the batch price and what it saves."""
    batch = cfg.model.batch
    in_flight = max(1, min(cfg.num_workers, e.prompts))
    waves = math.ceil(e.prompts / in_flight) if e.prompts else 0
    per_round = math.ceil(in_flight / batch.max_requests)
    low, high = waves, waves * cfg.max_turns
    lines = [
        f"batch mode: {low:,}-{high:,} rounds (turns x {waves} waves of {in_flight} sessions) x {per_round} "
        f"batch{'es' if per_round > 1 else ''} of up to {min(in_flight, batch.max_requests):,} requests; "
        f"~{low * batch.turnaround_h:g}-{high * batch.turnaround_h:g} h at model.batch.turnaround_h="
        f"{batch.turnaround_h:g} h a round"
    ]
    if e.cost_low is not None:
        d = batch.discount
        lines.append(
            f"cost at the batch price (x{d:g}): ${e.cost_low * d:.4f}-${e.cost_high * d:.4f}, saving "
            f"${e.cost_low * (1 - d):.4f}-${e.cost_high * (1 - d):.4f} against direct calls"
        )
    return "\n".join(lines)


async def dry_run(cfg: RunConfig, run_dir: Path, plan: Plan, state: LedgerState, stats: RunStats) -> str:
    """Check images, endpoint and model with one probe; estimate what the run will cost."""
    lines = []
    async with serving(cfg.model, run_dir) as served_url:
        backend = make_backend(cfg.sandbox, cfg.run_name, str(run_dir))
        unavailable = await backend.start(set(plan.images))
        await backend.shutdown()
        for image, reason in unavailable.items():
            lines.append(f"image {image} unavailable ({plan.images[image]} prompts would fail): {reason}")
        model = OpenAIChatModel(cfg.model, cfg.provider, cfg.reasoning, cfg.max_tokens, base_url=served_url)
        try:
            lines.append(await probe(model))
        finally:
            await model.aclose()
    found = estimate(cfg, plan.chars_to_run, plan.to_run, stats)  # (counted by the plan)
    lines.append(describe(found))
    if cfg.model.batch.enabled:
        lines.append(batch_plan(cfg, found))
    return "\n".join(lines)
