"""A whole run: check, plan, execute, derive the outputs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from hermes_runner import distributions, estimate
from hermes_runner.agent import AgentSettings, SessionResult
from hermes_runner.budget import CURRENT_PROMPT, RunBudget
from hermes_runner.config import HallucinatedToolPolicy, RunConfig
from hermes_runner.dataset import Prompt, parse_json
from hermes_runner.errors import ENDPOINT_DOWN_ERRORS, ConfigError, StorageFull
from hermes_runner.executors import Executor, Work, open_executor
from hermes_runner.model.client import OpenAIChatModel
from hermes_runner.model.ratelimit import EndpointLimiter, Throttle
from hermes_runner.model.serve import check_model, serving
from hermes_runner.plan import Plan, make_plan, pending
from hermes_runner.progress import RunProgress
from hermes_runner.rundir import hermes_import
from hermes_runner.rundir.manifest import now, open_run, past_durations, write_manifest
from hermes_runner.rundir.stats import RunStats
from hermes_runner.rundir.store import (
    CallLog,
    Ref,
    RunDirBusy,
    RunStore,
    atomic_write,
    atomic_write_json,
    dumps_line,
    remove_stale_temps,
    with_prompt_index,
)
from hermes_runner.sandbox import make_backend
from hermes_runner.session import Failure, Outcome
from hermes_runner.tools import backends as tool_services
from hermes_runner.tools.catalog import stats_names, tool_names, toolset_names
from hermes_runner.trajectory import entry as entries
from hermes_runner.usage import Usage
from hermes_runner.util import fastjson
from hermes_runner.util.redact import Redactor
from hermes_runner.worker import WorkerSpec

log = logging.getLogger(__name__)

CHECKPOINT_EVERY_S = 10.0


def load_prefill(path: str | None) -> list[dict]:
    if not path:
        return []
    if Path(path).is_dir():
        raise ConfigError(f"prefill_messages_file is a directory, not a JSON file: {path}")
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"prefill_messages_file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"prefill_messages_file {path} cannot be read: {exc.strerror or exc}") from None
    data, reason = parse_json(raw)
    if reason:
        raise ConfigError(f"prefill_messages_file {path} is unusable: {reason}")
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
    turns, with_r = entries.reasoning_turns(res)
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


def _positive(counts: Counter) -> dict:
    """The entries above zero (outcomes taken back for rows no longer in the dataset leave zeros)."""
    return {k: v for k, v in counts.items() if v > 0}


class Run:
    """State of one invocation of a run."""

    def __init__(
        self, cfg: RunConfig, run_dir: Path, overrides: list[str] | None = None, redact: Redactor | None = None
    ):
        self.cfg = cfg
        self.dir = Path(run_dir)
        self.overrides = overrides or []
        self.redact = redact or Redactor()
        self.storage_error: StorageFull | None = None  # the run dir could not be written: the run stops
        self.calls = CallLog()  # usage.jsonl: every model call of the run
        self._pending_calls: dict[str | None, CallLog] = {}  # this invocation's calls of prompts not yet recorded
        self.out_of_scope = 0  # prompts of the ledger that are not in the current dataset
        self.store = RunStore(self.dir)
        self.stats = RunStats()
        self.names = tool_names()
        self.started = time.time()
        self.interrupted = False
        self.budget_stop: str | None = None
        self.endpoint_down: str | None = None  # the endpoint refused connections or credentials: the run stopped
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
        cfg = self.cfg  # its values passed config.check before this Run was made
        check_model(cfg.model)  # conflicting model options stop here; a served file names the model
        distributions.validate(cfg.distribution, toolset_names())
        self.toolsets_dropped = tool_services.check_toolsets(cfg)
        self.fill = stats_names(set(cfg.distribution.toolsets) - set(self.toolsets_dropped))  # tool_stats keys
        self.prefill = load_prefill(cfg.prefill_messages_file)
        try:
            self.store.lock()
        except RunDirBusy as exc:
            raise ConfigError(f"{exc}: one run directory takes one runner at a time") from None
        remove_stale_temps(self.dir)
        adopted = hermes_import.adopt(cfg, self.dir, write=not cfg.dry_run)  # a run dir of the original Hermes runner
        self.invocation = open_run(cfg, self.dir, self.toolsets_dropped, self.redact)
        self.state = self.store.load(on_record=self.stats.add)
        if cfg.dry_run:
            hermes_import.preview(self.state, adopted, self.stats.add)
        plan = make_plan(cfg, self.state, self.dir)
        self.plan_index = idx = plan.current_index
        self.calls = self.store.load_calls(self.state.attempts)
        # Statistics and checkpoint cover the rows of the current dataset (spend counts every record).
        gone = {k for k in (*self.state.terminal, *self.state.failed) if k not in idx}
        self.out_of_scope = len(gone)
        if gone:
            self.store.load(on_record=lambda rec: rec["key"] in gone and self.stats.exclude(rec), repair=False)
            log.warning(
                "%d prompts recorded in %s are not in the current dataset %s (rows edited or removed%s): "
                "they are left out of trajectories.jsonl, statistics and the checkpoint; their records stay "
                "in ledger.jsonl and the batch files",
                len(gone), self.dir, cfg.dataset_file, ", or beyond max_samples" if cfg.max_samples else "",
            )  # fmt: skip
        return plan

    def spent(self) -> Usage:
        """Everything the run's model calls cost so far: the ledger's records and the calls of prompts that
        never reached it (cancelled, or the runner killed)."""
        total = Usage()
        total.add(self.stats.usage)
        calls = self._calls_now()
        total.add(Usage.from_dict(calls.unrecorded_usage))
        return total

    def _calls_now(self) -> CallLog:
        """`self.calls` with this invocation's calls of prompts still unrecorded added."""
        if not self._pending_calls:
            return self.calls
        out = CallLog(**{**self.calls.__dict__, "unrecorded_usage": dict(self.calls.unrecorded_usage)})
        for calls in self._pending_calls.values():
            out.unrecorded_api_calls += calls.unrecorded_api_calls
            out.unrecorded_errors += calls.unrecorded_errors
            for name, value in calls.unrecorded_usage.items():
                out.unrecorded_usage[name] = out.unrecorded_usage.get(name, 0) + value
        return out

    def _record_call(self, rec: dict) -> None:
        """A model call started or ended: into usage.jsonl, as it happens."""
        if self.storage_error:
            return
        try:
            self.store.write_usage(rec)
        except OSError as exc:
            self._storage_failed(exc)
            return
        self.calls.add(rec, recorded=True)  # totals; the spend counts once its prompt is recorded, or at the end
        calls = self._pending_calls.get(rec["key"])
        if calls is None:
            calls = self._pending_calls[rec["key"]] = CallLog()
        calls.add(rec, recorded=False)

    def _storage_failed(self, exc: OSError) -> None:
        """The run dir cannot be written (a full disk, ...): nothing more starts, in-flight prompts are cancelled."""
        if self.storage_error is None:
            self.storage_error = StorageFull.of(exc, self.dir)
            log.debug("storage error", exc_info=exc)
        if self.executor is not None:
            self.executor.cancel()

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
            self.budget = RunBudget(
                cfg.limits, self.spent(), self._budget_exhausted, record=self._record_call, invocation=self.invocation
            )
            settings = AgentSettings(
                max_turns=cfg.max_turns,
                system_prompt=cfg.system_prompt,
                ephemeral_system_prompt=cfg.ephemeral_system_prompt,
                prefill_messages=self.prefill,
                max_invalid_tool_turns=cfg.max_invalid_tool_turns,
                max_tokens=cfg.limits.prompt_max_tokens,
                max_cost_usd=cfg.limits.prompt_max_cost_usd,
                final_summary=cfg.output.final_summary,
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

        async def session(p: Prompt):
            CURRENT_PROMPT.set(p.key)  # (in this session's own task: its model calls are recorded under it)
            return await work(p)

        try:
            write_manifest(cfg, self.dir, self.toolsets_dropped, self.redact)  # the run has started
        except OSError as exc:
            self._storage_failed(exc)
            return
        syncer = asyncio.ensure_future(self._sync_loop())
        self.progress = RunProgress(
            cfg.run_name,
            plan.to_run,
            enabled=cfg.progress,
            throttle=self.limiter.throttle,
            interval_s=cfg.progress_interval_s,
            every_percent=cfg.progress_every_percent,
        )
        try:
            with self.progress:
                async for outcome in executor.map_unordered(session, items()):
                    batch = batch_of.pop(outcome.prompt.key)
                    if self.storage_error:
                        continue  # draining: the prompt runs again next time
                    try:
                        self._record(outcome, batch)
                    except OSError as exc:
                        self._storage_failed(exc)
        finally:
            syncer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await syncer

    def _record(self, outcome: Outcome, batch: int) -> None:
        cfg, p = self.cfg, outcome.prompt
        rec = _summary(outcome, p.key, p.index, self.invocation)
        rec["batch"] = batch
        if outcome.timeline:
            self.store.write_timeline({"key": p.key, "inv": self.invocation, "calls": outcome.timeline})
        if isinstance(outcome, Failure):
            error = self.redact.text(outcome.error)
            if outcome.error_type in ENDPOINT_DOWN_ERRORS:
                self._endpoint_down(error)
            else:
                log.warning("prompt %d failed: %s: %s", p.index, outcome.error_type, error)
            rec.update(error_type=outcome.error_type, error=error)
            detail = {"traceback": self.redact.text(outcome.traceback), "prompt": p.prompt[:2000]}
            self.store.write_failure(rec, detail)
            self.state.failed[p.key] = rec
            self.plan_index[p.key] = p.index
            self.stats.add(rec)
            status = "failed"
        else:
            status, reason, summary = classify(outcome, cfg, self.names)
            rec.update(summary)
            if reason:
                rec["reason"] = reason
            entry = entries.entry(
                outcome,
                batch_num=batch,
                model=outcome.model or cfg.model.name,  # the model that answered, as its replies say
                tool_names=self.fill,
                system_prompt=cfg.system_prompt,
                layout=cfg.output.layout,
                discard_reason=reason or "",
            )
            self.store.write_trajectory(status, batch, dumps_line(entry), rec)
            self.state.terminal[p.key] = Ref(status, rec["file"], rec["offset"], rec["length"], p.index, batch)
            self.state.failed.pop(p.key, None)
            self.plan_index[p.key] = p.index
            self.stats.add(rec)
            if cfg.verbose:
                log.info("prompt %d %s%s", p.index, status, f" ({reason})" if reason else "")
        self.state.attempts.add((p.key, self.invocation))
        self._pending_calls.pop(p.key, None)  # its spend is in the record now
        left = self.batch_left[batch] = self.batch_left.get(batch, self._batch_total(batch)) - 1
        if left <= 0:
            del self.batch_left[batch]
            self.store.close_batch(batch)
        if self.progress:
            self.progress.advance(status, outcome.usage, self.executor.in_flight if self.executor else 0)

    def _endpoint_down(self, error: str) -> None:
        """Fail fast: no new prompt starts (those not started stay pending); said once."""
        if not self.endpoint_down:
            self.endpoint_down = error
            log.error("no new prompt starts, the model endpoint can serve none: %s", error)
        if self.executor:
            self.executor.stop()

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
            try:
                await asyncio.to_thread(self.store.sync)
                if time.monotonic() - last_ckpt > CHECKPOINT_EVERY_S:
                    last_ckpt = time.monotonic()
                    await asyncio.to_thread(self.write_checkpoint)
            except OSError as exc:
                self._storage_failed(exc)
                return

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
        failed = sorted(idx[k] for k in list(self.state.failed) if k in idx)
        batch_stats = {
            str(b): {"processed": sum(c.values()), **{s: c[s] for s in ("ok", "discarded", "failed")}}
            for b, c in sorted(self.stats.batches.items())
            if b >= 0 and sum(c.values()) > 0
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
            ((idx[k], k, r) for k, r in self.state.terminal.items() if r.status == "ok" and k in idx),
            key=lambda t: (t[0], t[1]),
        )
        handles: dict[str, int] = {}

        foreign, layout = self.state.foreign, self.cfg.output.layout

        def lines() -> Iterator[bytes]:
            for index, key, ref in refs:
                line = self.store.read_entry(ref, handles)
                if ref.file in foreign:  # the original runner's line: our keys and types, so the file loads as one
                    row = entries.conform(fastjson.loads(line), key=key, tool_names=self.fill, layout=layout)
                    line = dumps_line(row)
                yield line if index == ref.index else with_prompt_index(line, index)

        try:
            atomic_write(self.dir / "trajectories.jsonl", lines())
        finally:
            for fd in handles.values():
                os.close(fd)
        return len(refs)

    def write_statistics(self, plan: Plan) -> dict:
        s, idx = self.stats, self.plan_index
        s.failed = Counter(r.get("error_type", "Error") for k, r in self.state.failed.items() if k in idx)
        calls = self._calls_now()
        usage = self.spent()
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
                "stopped": s.stopped,
                "discarded": sum(s.discarded.values()),
                "failed": sum(s.failed.values()),
                "pending": max(0, plan.total - s.ok - sum(s.discarded.values()) - sum(s.failed.values())),
                "rejected_lines": plan.rejected,
            },
            "stop_reasons": _positive(s.stop_reasons),
            "stopped_reasons": _positive(s.stopped_reasons),
            "not_in_dataset": {"prompts": self.out_of_scope, **s.out_of_scope},
            "discarded_by_reason": _positive(s.discarded),
            "discarded_no_reasoning": s.discarded.get("no_reasoning", 0),
            "failed_by_error": dict(s.failed),
            "tool_statistics": s.tool_statistics(self.names),
            "unknown_tool_calls": _positive(s.unknown_tools),
            "reasoning_statistics": s.reasoning_statistics(),
            "reasoning_statistics_kept": s.reasoning_statistics(kept_only=True),
            "toolsets_sampled": _positive(s.toolsets_sampled),
            "toolsets_unavailable": self.toolsets_dropped,
            "usage": usage.as_dict(),
            "api_calls": s.api_calls + calls.unrecorded_api_calls,
            "retries": s.retries + calls.unrecorded_errors,
            "model_calls": {
                "started": calls.started,
                "answered": calls.answered,
                "failed": calls.failed,
                "unanswered": calls.unanswered,
                "of_unrecorded_prompts": calls.unrecorded_api_calls,
            },
            "prompt_seconds": round(s.prompt_seconds, 3),
            "invocations": self.invocation + 1,
            "stopped_by_budget": self.budget_stop,
            "invocation": self._this_invocation(),
        }
        atomic_write_json(self.dir / "statistics.json", stats)
        return stats

    def _this_invocation(self) -> dict:
        """What this invocation ran: prompts, time, rate; retries, 429s and back-off at the endpoint."""
        t = self.limiter.throttle() if self.limiter else Throttle()
        ran = self.progress.done if self.progress else 0
        seconds = time.time() - self.started
        return {
            "prompts": ran,
            "seconds": round(seconds, 3),
            "prompts_per_s": round(ran / seconds, 3) if seconds > 0 else 0.0,
            "retries": t.retries,
            "rate_limited": t.rate_limited,
            "backoff_seconds": round(t.backoff_s, 3),
        }

    def write_features(self) -> None:
        """The HF `datasets` features of this run's JSONL files (docs/training.md: loading with them)."""
        spec = entries.features(self.fill, self.cfg.output.layout)
        atomic_write_json(self.dir / entries.FEATURES_FILE, spec)

    def finalize(self, plan: Plan) -> dict:
        """Write the derived files; on a full disk, the ones not written are rebuilt by the next run."""
        try:
            self.store.close()
            self.write_checkpoint()
            self.write_features()
            kept = self.write_trajectories()
            stats = self.write_statistics(plan)
        except OSError as exc:
            self._storage_failed(exc)
            raise self.storage_error from None
        stats["trajectories"] = kept
        return stats
