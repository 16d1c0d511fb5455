"""The files derived from the ledger at the end of an invocation (and the checkpoint, every few seconds):
checkpoint.json, trajectories.jsonl, statistics.json and the datasets features."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from hermes_runner.config import CacheMode, OutputLayout
from hermes_runner.config.root import RunConfig
from hermes_runner.model.ratelimit import Throttle
from hermes_runner.run.plan import Plan
from hermes_runner.rundir.layout import BATCH_GLOB, CHECKPOINT, FEATURES_FILE, STATISTICS, TRAJECTORIES
from hermes_runner.rundir.manifest import now
from hermes_runner.rundir.stats import RunStats
from hermes_runner.rundir.store import (
    CallLog,
    LedgerState,
    RunStore,
    atomic_write,
    atomic_write_json,
    dumps_line,
    with_prompt_index,
)
from hermes_runner.trajectory import entry as entries
from hermes_runner.usage import Usage
from hermes_runner.util import fastjson


def _positive(counts: Counter) -> dict:
    """The entries above zero (outcomes taken back for rows no longer in the dataset leave zeros)."""
    return {k: v for k, v in counts.items() if v > 0}


def write_checkpoint(run_dir: Path, run_name: str, state: LedgerState, idx: dict[str, int], stats: RunStats) -> None:
    """checkpoint.json: the prompt indices done, discarded and failed (of the current dataset, `idx`)."""
    by_status: dict[str, list[int]] = {"ok": [], "discarded": []}
    for key, ref in list(state.terminal.items()):
        if key in idx:
            by_status[ref.status].append(idx[key])
    failed = sorted(idx[k] for k in list(state.failed) if k in idx)
    batch_stats = {
        str(b): {"processed": sum(c.values()), **{s: c[s] for s in ("ok", "discarded", "failed")}}
        for b, c in sorted(stats.batches.items())
        if b >= 0 and sum(c.values()) > 0
    }
    atomic_write_json(
        run_dir / CHECKPOINT,
        {
            "run_name": run_name,
            "completed_prompts": sorted(by_status["ok"] + by_status["discarded"]),
            "discarded_prompts": sorted(by_status["discarded"]),
            "failed_prompts": failed,
            "batch_stats": batch_stats,
            "last_updated": now(),
        },
    )


def write_trajectories(
    run_dir: Path,
    store: RunStore,
    state: LedgerState,
    idx: dict[str, int],
    fill: list[str],
    layout: OutputLayout,
    unscored: Sequence[dict] = (),
    best_of_k: bool = False,
) -> int:
    """trajectories.jsonl: the kept entries of the current dataset in prompt order; returns how many.

    `unscored`: the score records of imported entries (never scored); `best_of_k`: only the best sample of each row."""
    refs = sorted(
        ((idx[k], k, r) for k, r in state.terminal.items() if r.status == "ok" and k in idx),
        key=lambda t: (t[0], t[2].sample, t[1]),  # dataset order, a row's samples in order
    )
    handles: dict[str, int] = {}

    foreign = state.foreign
    if best_of_k:
        best = entries.best_of_k((key, fastjson.loads(store.read_entry(ref, handles))) for _, key, ref in refs)
        refs = [r for r in refs if r[1] in best]

    def lines() -> Iterator[bytes]:
        for index, key, ref in refs:
            line = store.read_entry(ref, handles)
            if ref.file in foreign:  # the original runner's line: our keys and types, so the file loads as one
                row = entries.conform(fastjson.loads(line), key=key, tool_names=fill, layout=layout, scores=unscored)
                line = dumps_line(row)
            yield line if index == ref.index else with_prompt_index(line, index)

    try:
        atomic_write(run_dir / TRAJECTORIES, lines())
    finally:
        for fd in handles.values():
            os.close(fd)
    return len(refs)


def write_statistics(
    run_dir: Path,
    cfg: RunConfig,
    plan: Plan,
    state: LedgerState,
    idx: dict[str, int],
    s: RunStats,
    *,
    calls: CallLog,
    usage: Usage,
    duration_s: float,
    out_of_scope: int,
    tool_names: list[str],
    toolsets_dropped: dict[str, str],
    invocations: int,
    stopped_by_budget: str | None,
    this_invocation: dict | None = None,
) -> dict:
    """statistics.json: counts, tool and reasoning statistics, usage and model calls of the whole run."""
    s.failed = Counter(r.get("error_type", "Error") for k, r in state.failed.items() if k in idx)
    batches = sorted({int(p.stem.split("_")[1]) for p in run_dir.glob(BATCH_GLOB)})
    stats = {
        "run_name": cfg.run_name,
        "distribution": cfg.distribution.name,
        "model": cfg.model.name,
        "batch_size": cfg.batch_size,
        "total_prompts": plan.total,
        "total_batches": len(batches),
        "completed_at": now(),
        "duration_seconds": round(duration_s, 3),
        "prompts": _prompts(plan, s),
        "stop_reasons": _positive(s.stop_reasons),
        "stopped_reasons": _positive(s.stopped_reasons),
        "answered_at_limit": _at_limit(s),
        "not_in_dataset": {"prompts": out_of_scope, **s.out_of_scope},
        "discarded_by_reason": _positive(s.discarded),
        "discarded_no_reasoning": s.discarded.get("no_reasoning", 0),
        "failed_by_error": dict(s.failed),
        "tool_statistics": s.tool_statistics(tool_names),
        "unknown_tool_calls": _positive(s.unknown_tools),
        "reasoning_statistics": s.reasoning_statistics(),
        "reasoning_statistics_kept": s.reasoning_statistics(kept_only=True),
        "toolsets_sampled": _positive(s.toolsets_sampled),
        "toolsets_unavailable": toolsets_dropped,
        "usage": usage.as_dict(),
        **_calls(s, calls, cfg.cache.mode),
        "prompt_seconds": round(s.prompt_seconds, 3),
        "invocations": invocations,
        "stopped_by_budget": stopped_by_budget,
        "invocation": this_invocation or {},  # this invocation's pace and endpoint trouble
        "samples_per_prompt": cfg.samples_per_prompt,
    }
    k, model = cfg.samples_per_prompt, cfg.model.name
    if (scores := s.scores.summary(k, model)) is not None:  # only when the records carry scores
        stats["scores"] = scores
        stats["results"] = s.scores.results(k, model)
    atomic_write_json(run_dir / STATISTICS, stats)
    return stats


def _at_limit(s: RunStats) -> dict:
    """The finished prompts a limit stopped (max_turns, timeout, token_limit, cost_limit) and how pass@k counted
    them (limits.at_limit: scored, fail, drop)."""
    return {"prompts": sum(s.at_limit.values()), "by_limit": _positive(s.at_limit),
            "counted_as": _positive(s.at_limit_counted)}  # fmt: skip


def _prompts(plan: Plan, s: RunStats) -> dict:
    """The prompts of the current dataset by status."""
    discarded, failed = sum(s.discarded.values()), sum(s.failed.values())
    return {
        "total": plan.total, "ok": s.ok, "completed": s.completed, "partial": s.partial, "stopped": s.stopped,
        "discarded": discarded, "failed": failed, "pending": max(0, plan.total - s.ok - discarded - failed),
        "rejected_lines": plan.rejected,
    }  # fmt: skip


def _calls(s: RunStats, calls: CallLog, cache: CacheMode) -> dict:
    """The run's model calls: of the records and of the prompts never recorded; the replies of the cache."""
    return {
        "api_calls": s.api_calls + calls.unrecorded_api_calls,
        "retries": s.retries + calls.unrecorded_errors,
        "model_calls": {k: getattr(calls, k) for k in ("started", "answered", "failed", "unanswered")}
        | {"of_unrecorded_prompts": calls.unrecorded_api_calls},
        "cache": {  # replies replayed from the response cache (docs/caching.md): no call made, nothing spent
            "mode": cache.value,
            "hits": s.cache_hits,
            "tokens_saved": s.saved.total_tokens,
            "cost_saved_usd": round(s.saved.cost_usd, 6),
        },
    }


def pace(ran: int, seconds: float, t: Throttle) -> dict:
    """What this invocation ran: prompts, time, rate; retries, 429s and back-off at the endpoint."""
    return {
        "prompts": ran, "seconds": round(seconds, 3), "prompts_per_s": round(ran / seconds, 3) if seconds > 0 else 0.0,
        "retries": t.retries, "rate_limited": t.rate_limited, "backoff_seconds": round(t.backoff_s, 3),
    }  # fmt: skip


def write_features(run_dir: Path, fill: list[str], layout: OutputLayout) -> None:
    """The HF `datasets` features of this run's JSONL files (docs/training.md: loading with them)."""
    atomic_write_json(run_dir / FEATURES_FILE, entries.features(fill, layout))
