"""A whole run: check, plan, execute, derive the outputs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from hermes_runner import distributions, estimate, sharegpt
from hermes_runner import services as tool_services
from hermes_runner.agent import AgentSettings, SessionResult
from hermes_runner.budget import RunBudget
from hermes_runner.config import HallucinatedToolPolicy, RunConfig
from hermes_runner.dataset import Prompt
from hermes_runner.errors import ConfigError
from hermes_runner.executor import Executor, Work, open_executor
from hermes_runner.manifest import now, open_run, past_durations
from hermes_runner.model import OpenAIChatModel
from hermes_runner.plan import Plan, make_plan, pending
from hermes_runner.progress import RunProgress
from hermes_runner.ratelimit import EndpointLimiter
from hermes_runner.sandbox import make_backend
from hermes_runner.serve import check_model, serving
from hermes_runner.session import Failure, Outcome
from hermes_runner.stats import RunStats
from hermes_runner.store import (
    Ref,
    RunDirBusy,
    RunStore,
    atomic_write,
    atomic_write_json,
    dumps_line,
    with_prompt_index,
)
from hermes_runner.tools.registry import tool_names, toolset_names
from hermes_runner.worker import WorkerSpec

log = logging.getLogger(__name__)

CHECKPOINT_EVERY_S = 10.0


def load_prefill(path: str | None) -> list[dict]:
    if not path:
        return []
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"prefill_messages_file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"prefill_messages_file {path} is not valid JSON: {exc}") from None
    if not isinstance(data, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in data
    ):
        raise ConfigError(f"prefill_messages_file {path} must hold a JSON list of {{role, content}} messages")
    return data


def _summary(res: SessionResult | Failure, key: str, index: int, invocation: int) -> dict:
    rec = {
        "key": key,
        "index": index,
        "inv": invocation,
        "ts": now(),
        "api_calls": res.api_calls,
        "retries": res.retries,
        "duration_s": round(res.duration_s, 3),
        "toolsets": res.toolsets,
        "usage": res.usage.as_dict(),
    }
    return rec


def classify(res: SessionResult, cfg: RunConfig, names: list[str]) -> tuple[str, str | None, dict]:
    """Apply the filters: (status, discard reason, stats summary)."""
    turns, with_r = sharegpt.reasoning_turns(res)
    unknown = Counter(n for n, _ in res.tool_calls if n not in set(names))
    tools: dict[str, list[int]] = {}
    for name, ok in res.tool_calls:
        if name in unknown:
            continue
        t = tools.setdefault(name, [0, 0])
        t[0] += 1
        t[1] += not ok
    summary = {
        "completed": res.completed, "partial": res.partial, "stop": res.stop_reason,
        "turns": turns, "reasoning_turns": with_r, "tools": tools, "unknown_tools": dict(unknown),
    }  # fmt: skip
    if cfg.filters.require_reasoning and with_r == 0:
        return "discarded", "no_reasoning", summary
    if unknown and cfg.filters.hallucinated_tools == HallucinatedToolPolicy.drop:
        return "discarded", "hallucinated_tool", summary
    return "ok", None, summary


class Run:
    """State of one invocation of a run."""

    def __init__(self, cfg: RunConfig, run_dir: Path, overrides: list[str] | None = None):
        self.cfg = cfg
        self.dir = Path(run_dir)
        self.overrides = overrides or []
        self.store = RunStore(self.dir)
        self.stats = RunStats()
        self.names = tool_names()
        self.started = time.time()
        self.interrupted = False
        self.budget_stop: str | None = None
        self.limiter: EndpointLimiter | None = None
        self.executor: Executor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task | None = None
        self.progress: RunProgress | None = None
        self.batch_left: dict[int, int] = {}  # open batches: prompts still to record (from _batch_total at first)
        self._first_batch = self._to_run = 0
        self.toolsets_dropped: dict[str, str] = {}  # toolset -> missing backend

    # -- setup -----------------------------------------------------------------------

    def prepare(self) -> Plan:
        cfg = self.cfg
        if cfg.batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, not {cfg.batch_size}")
        if cfg.num_workers < 1:
            raise ConfigError(f"num_workers must be >= 1, not {cfg.num_workers}")
        if cfg.max_turns < 1:
            raise ConfigError(f"max_turns must be >= 1, not {cfg.max_turns}")
        if not 0 <= cfg.shard.index < cfg.shard.count:
            raise ConfigError(f"shard.index must be in [0, shard.count), got {cfg.shard.index}/{cfg.shard.count}")
        check_model(cfg.model)  # conflicting model options stop here; a served file names the model
        distributions.validate(cfg.distribution, toolset_names())
        self.toolsets_dropped = tool_services.check_toolsets(cfg)
        self.prefill = load_prefill(cfg.prefill_messages_file)
        try:
            self.store.lock()
        except RunDirBusy as exc:
            raise ConfigError(f"{exc}: one run directory takes one runner at a time") from None
        self.invocation = open_run(cfg, self.dir, self.toolsets_dropped, create=not cfg.dry_run)
        self.state = self.store.load(on_record=self.stats.add)
        plan = make_plan(cfg, self.state, self.dir)
        self.plan_index = plan.current_index
        return plan

    # -- execution ---------------------------------------------------------------------

    async def dry_run(self, plan: Plan) -> str:
        """Check images, endpoint and model with one probe; estimate what the run will cost."""
        cfg, lines = self.cfg, []
        async with serving(cfg.model, self.dir) as served_url:
            backend = make_backend(cfg.sandbox, cfg.run_name, str(self.dir))
            unavailable = await backend.start(set(plan.images))
            await backend.shutdown()
            for image, reason in unavailable.items():
                lines.append(f"image {image} unavailable ({plan.images[image]} prompts would fail): {reason}")
            model = OpenAIChatModel(cfg.model, cfg.provider, cfg.reasoning, cfg.max_tokens, base_url=served_url)
            try:
                lines.append(await estimate.probe(model))
            finally:
                await model.aclose()
        chars = sum(len(p.prompt) for p, _ in pending(cfg, self.state, 0))
        lines.append(estimate.describe(estimate.estimate(cfg, chars, plan.to_run, self.stats)))
        return "\n".join(lines)

    async def execute(self, plan: Plan) -> None:
        self._loop, self._main = asyncio.get_running_loop(), asyncio.current_task()
        try:
            await self._execute(plan)
        except asyncio.CancelledError:
            if not self.interrupted:
                raise
            log.warning("interrupted while starting: nothing was run")

    async def _execute(self, plan: Plan) -> None:
        cfg = self.cfg
        async with serving(cfg.model, self.dir) as served_url:
            self.limiter = EndpointLimiter(cfg.model.rate_limit, cfg.num_workers)
            self.budget = RunBudget(cfg.limits, self.stats.usage, self._budget_exhausted)
            settings = AgentSettings(
                max_turns=cfg.max_turns,
                system_prompt=cfg.system_prompt,
                ephemeral_system_prompt=cfg.ephemeral_system_prompt,
                prefill_messages=self.prefill,
                max_invalid_tool_turns=cfg.max_invalid_tool_turns,
                max_tokens=cfg.limits.prompt_max_tokens,
                max_cost_usd=cfg.limits.prompt_max_cost_usd,
                verbose=cfg.verbose,
                log_prefix_chars=cfg.log_prefix_chars,
            )
            spec = WorkerSpec(
                cfg,
                str(self.dir),
                settings,
                served_url,
                dict(plan.images),
                cfg.num_workers,
                dict(self.toolsets_dropped),
            )
            async with open_executor(cfg, spec, self.limiter, self.budget) as (executor, work):
                self.executor = executor
                await self._drive(plan, work)

    async def _drive(self, plan: Plan, work: Work) -> None:
        cfg = self.cfg
        if self.interrupted or self.budget_stop:
            return
        executor = self.executor
        self.limiter.on_concurrency = executor.set_limit
        first_batch = self._first_batch = self.state.next_batch
        self._to_run = plan.to_run
        batch_of: dict[str, int] = {}

        def items() -> Iterator[Prompt]:
            for p, b in pending(cfg, self.state, first_batch):
                batch_of[p.key] = b
                yield p

        syncer = asyncio.ensure_future(self._sync_loop())
        self.progress = RunProgress(cfg.run_name, plan.to_run, enabled=cfg.progress, status=self.limiter.describe)
        try:
            with self.progress:
                async for outcome in executor.map_unordered(work, items()):
                    self._record(outcome, batch_of.pop(outcome.prompt.key))
        finally:
            syncer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await syncer

    def _record(self, outcome: Outcome, batch: int) -> None:
        cfg, p = self.cfg, outcome.prompt
        rec = _summary(outcome, p.key, p.index, self.invocation)
        rec["batch"] = batch
        if isinstance(outcome, Failure):
            log.warning("prompt %d failed: %s: %s", p.index, outcome.error_type, outcome.error)
            rec.update(error_type=outcome.error_type, error=outcome.error)
            self.store.write_failure(rec, {"traceback": outcome.traceback, "prompt": p.prompt[:2000]})
            self.state.failed[p.key] = rec
            self.stats.add(rec)
            status = "failed"
        else:
            status, reason, summary = classify(outcome, cfg, self.names)
            rec.update(summary)
            if reason:
                rec["reason"] = reason
            entry = sharegpt.entry(
                outcome, batch_num=batch, model=cfg.model.name, tool_names=self.names, system_prompt=cfg.system_prompt
            )
            if reason:
                entry["discard_reason"] = reason
            self.store.write_trajectory(status, batch, dumps_line(entry), rec)
            self.state.terminal[p.key] = Ref(status, rec["file"], rec["offset"], rec["length"], p.index, batch)
            self.state.failed.pop(p.key, None)
            self.plan_index[p.key] = p.index
            self.stats.add(rec)
            if cfg.verbose:
                log.info("prompt %d %s%s", p.index, status, f" ({reason})" if reason else "")
        left = self.batch_left[batch] = self.batch_left.get(batch, self._batch_total(batch)) - 1
        if left <= 0:
            del self.batch_left[batch]
            self.store.close_batch(batch)
        if self.progress:
            self.progress.advance(status, outcome.usage, self.executor.in_flight if self.executor else 0)

    def _budget_exhausted(self, reason: str) -> None:
        """No new prompt starts; in-flight prompts finish."""
        if not self.budget_stop:
            self.budget_stop = reason
            log.warning("budget: %s; no new prompt starts, in-flight prompts finish", reason)
        if self.executor:
            self.executor.stop()

    def _batch_total(self, batch: int) -> int:
        """How many of this invocation's prompts go to `batch` (all full but the last)."""
        return min(self.cfg.batch_size, self._to_run - (batch - self._first_batch) * self.cfg.batch_size)

    async def _sync_loop(self) -> None:
        last_ckpt = time.monotonic()
        while True:
            await asyncio.sleep(self.cfg.fsync_interval_s)
            if self.progress and self.executor:
                self.progress.refresh(self.executor.in_flight)
            await asyncio.to_thread(self.store.sync)
            if time.monotonic() - last_ckpt > CHECKPOINT_EVERY_S:
                last_ckpt = time.monotonic()
                await asyncio.to_thread(self.write_checkpoint)

    def install_signals(self) -> None:
        """Ctrl-C / SIGTERM: the first stops gracefully, a second exits at once."""

        def on_signal(signum: int, frame: object) -> None:
            if self.interrupted:
                os.write(2, b"second interrupt: exiting now (a rerun resumes; leftovers are cleaned at its start)\n")
                os._exit(130)
            self.interrupted = True
            os.write(2, b"interrupted: cancelling in-flight prompts and saving progress (again to exit now)\n")
            if self._loop is not None and self.executor is not None:
                self._loop.call_soon_threadsafe(self.executor.cancel)
            elif self._loop is not None and self._main is not None:
                self._loop.call_soon_threadsafe(self._main.cancel)  # still starting (model server, images, ...)

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)

    @staticmethod
    def restore_signals() -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)

    # -- derived outputs -----------------------------------------------------------------

    def write_checkpoint(self) -> None:
        idx = self.plan_index
        by_status: dict[str, list[int]] = {"ok": [], "discarded": []}
        for key, ref in list(self.state.terminal.items()):
            if key in idx:
                by_status[ref.status].append(idx[key])
        failed = sorted(idx_ for k, r in list(self.state.failed.items()) if (idx_ := r.get("index")) is not None)
        batch_stats = {
            str(b): {"processed": sum(c.values()), **{s: c[s] for s in ("ok", "discarded", "failed")}}
            for b, c in sorted(self.stats.batches.items())
            if b >= 0
        }
        atomic_write_json(
            self.dir / "checkpoint.json",
            {
                "run_name": self.cfg.run_name,
                "completed_prompts": sorted(by_status["ok"] + by_status["discarded"]),
                "discarded_prompts": sorted(by_status["discarded"]),
                "failed_prompts": failed,
                "batch_stats": batch_stats,
                "last_updated": now(),
            },
        )

    def write_trajectories(self) -> int:
        idx = self.plan_index
        refs = sorted(
            ((idx.get(k, r.index), k, r) for k, r in self.state.terminal.items() if r.status == "ok"),
            key=lambda t: (t[0], t[1]),
        )
        handles: dict[str, int] = {}

        def lines() -> Iterator[bytes]:
            for index, _, ref in refs:
                line = self.store.read_entry(ref, handles)
                yield line if index == ref.index else with_prompt_index(line, index)

        try:
            atomic_write(self.dir / "trajectories.jsonl", lines())
        finally:
            for fd in handles.values():
                os.close(fd)
        return len(refs)

    def write_statistics(self, plan: Plan) -> dict:
        s = self.stats
        s.failed = Counter(r.get("error_type", "Error") for r in self.state.failed.values())
        durations = past_durations(self.dir) + (time.time() - self.started)
        batches = sorted({int(p.stem.split("_")[1]) for p in self.dir.glob("batch_*.jsonl")})
        stats = {
            "run_name": self.cfg.run_name,
            "distribution": self.cfg.distribution.name,
            "model": self.cfg.model.name,
            "batch_size": self.cfg.batch_size,
            "total_prompts": plan.total,
            "total_batches": len(batches),
            "completed_at": now(),
            "duration_seconds": round(durations, 3),
            "prompts": {
                "total": plan.total,
                "ok": s.ok,
                "completed": s.completed,
                "partial": s.partial,
                "discarded": sum(s.discarded.values()),
                "failed": sum(s.failed.values()),
                "pending": max(0, plan.total - s.ok - sum(s.discarded.values()) - sum(s.failed.values())),
                "rejected_lines": plan.rejected,
            },
            "discarded_by_reason": dict(s.discarded),
            "discarded_no_reasoning": s.discarded.get("no_reasoning", 0),
            "failed_by_error": dict(s.failed),
            "tool_statistics": s.tool_statistics(self.names),
            "unknown_tool_calls": dict(s.unknown_tools),
            "reasoning_statistics": s.reasoning_statistics(),
            "reasoning_statistics_kept": s.reasoning_statistics(kept_only=True),
            "toolsets_sampled": dict(s.toolsets_sampled),
            "toolsets_unavailable": self.toolsets_dropped,
            "usage": s.usage.as_dict(),
            "api_calls": s.api_calls,
            "retries": s.retries,
            "prompt_seconds": round(s.prompt_seconds, 3),
            "invocations": self.invocation + 1,
            "stopped_by_budget": self.budget_stop,
        }
        atomic_write_json(self.dir / "statistics.json", stats)
        return stats

    def finalize(self, plan: Plan) -> dict:
        self.store.close()
        self.write_checkpoint()
        kept = self.write_trajectories()
        stats = self.write_statistics(plan)
        stats["trajectories"] = kept
        return stats
