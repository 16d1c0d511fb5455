"""One invocation of a run: prepare, drive, record, signals, finalize; `execute_run` runs one start to end.

It returns an `InvocationResult` (exit code, statistics, plan, why it stopped) and prints nothing: cli.py
prints the plan, the summary and the closing lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from hermes_runner.agent.loop import AgentSettings
from hermes_runner.agent.session import Failure, Outcome
from hermes_runner.agent.worker import WorkerSpec
from hermes_runner.config import DatasetFormat, as_container, check
from hermes_runner.config.root import RunConfig
from hermes_runner.dataset import Prompt, check_source, detect_format, load_prefill
from hermes_runner.errors import ENDPOINT_DOWN_ERRORS, ConfigError, ExitCode, RunDirBusy, StorageFull
from hermes_runner.executors import Executor, Work, open_executor
from hermes_runner.model.ratelimit import EndpointLimiter, Throttle
from hermes_runner.model.serve import check_model, serving
from hermes_runner.run import estimate, outputs
from hermes_runner.run.budget import CURRENT_PROMPT, RunBudget
from hermes_runner.run.discards import nothing_kept
from hermes_runner.run.plan import Plan, make_plan, pending
from hermes_runner.run.progress import RunProgress
from hermes_runner.run.record import _summary, classify, ledger_scores
from hermes_runner.rundir import hermes_import
from hermes_runner.rundir.manifest import end_invocation, open_run, past_durations, start_invocation, write_manifest
from hermes_runner.rundir.stats import RunStats
from hermes_runner.rundir.store import (
    CallLog,
    LedgerState,
    Ref,
    RunStore,
    abandon_prelock,
    dumps_line,
    remove_stale_temps,
)
from hermes_runner.scorers import unscored
from hermes_runner.tools import backends as tool_services
from hermes_runner.tools import distributions
from hermes_runner.tools.catalog import all_tools, stats_names, tool_names, toolset_names
from hermes_runner.trajectory import entry as entries
from hermes_runner.usage import Usage
from hermes_runner.util import gctune, stacks
from hermes_runner.util.redact import Redactor, redacting_logs

log = logging.getLogger(__name__)

CHECKPOINT_EVERY_S = 10.0


class Stop(str, Enum):
    """Why no new prompt starts (in-flight prompts finish; those not started stay pending)."""

    endpoint_down = "endpoint_down"  # the endpoint refused connections or credentials
    budget = "budget"  # limits.max_cost_usd or limits.max_tokens_total reached


_STOP_LOG = {
    Stop.endpoint_down: (logging.ERROR, "no new prompt starts, the model endpoint can serve none: %s"),
    Stop.budget: (logging.WARNING, "budget: %s; no new prompt starts, in-flight prompts finish"),
}


@dataclass
class InvocationResult:
    """What one invocation did, for the CLI to print."""

    code: ExitCode
    stats: dict | None = None  # statistics.json (+ "trajectories": entries written); None if nothing ran
    plan: Plan | None = None
    dry_run: str | None = None  # the dry run's findings (dry_run=true)
    interrupted: bool = False  # Ctrl-C / SIGTERM stopped it
    stops: dict[Stop, str] = field(default_factory=dict)  # why no new prompt started any more


class Run:
    """State of one invocation of a run: prepare, execute (drive, record), signals, finalize."""

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
        self.stops: dict[Stop, str] = {}  # why no new prompt starts any more
        self.limiter: EndpointLimiter | None = None
        self.budget: RunBudget | None = None
        self.executor: Executor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task | None = None
        self.progress: RunProgress | None = None
        self.batch_left: dict[int, int] = {}  # open batches: prompts still to record (from _batch_total at first)
        self._first_batch = self._to_run = 0
        self.toolsets_dropped: dict[str, str] = {}  # toolset -> missing backend
        # set by prepare():
        self.fill: list[str] = []  # the tool_stats keys of the entries
        self.prefill: list[dict] = []  # prefill_messages_file
        self.invocation = -1  # this invocation's number in run.json
        self.state: LedgerState | None = None  # what the ledger holds
        self.plan_index: dict[str, int] = {}  # recorded key -> its index in the current dataset

    # -- setup -----------------------------------------------------------------------

    def prepare(self) -> Plan:
        cfg = self.cfg  # its values passed config.check before this Run was made
        self.prefill = load_prefill(cfg.prefill_messages_file)  # the input files first: nothing said before
        if detect_format(cfg.dataset_file, cfg.dataset) != DatasetFormat.hf:
            check_source(cfg.dataset_file)
        check_model(cfg.model)  # conflicting model options stop here; a served file names the model
        distributions.validate(cfg.distribution, toolset_names())
        self.toolsets_dropped = tool_services.check_toolsets(cfg)
        self.fill = stats_names(set(cfg.distribution.toolsets) - set(self.toolsets_dropped))  # tool_stats keys
        try:
            self.store.lock(claim=False)
        except RunDirBusy as exc:
            raise ConfigError(f"{exc}: one run directory takes one runner at a time") from None
        # The directory's checks, before anything in it changes: a refused directory stays as it was.
        adopted = hermes_import.adopt(cfg, self.dir, write=not cfg.dry_run)  # a run dir of the original Hermes runner
        self.invocation = open_run(cfg, self.dir, self.toolsets_dropped, self.redact)
        self.store.claim()  # the directory is the run's
        remove_stale_temps(self.dir)
        self.state = self.store.load(on_record=self.stats.add)
        if cfg.dry_run:
            hermes_import.preview(self.state, adopted, self.stats.add)
        plan = make_plan(cfg, self.state, self.dir, note=None if cfg.dry_run else self.store.write_note)
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
                cfg.limits,
                self.spent(),
                functools.partial(self._stop, Stop.budget),
                record=self._record_call,
                invocation=self.invocation,
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
            hooks, tool_hooks = [self.limiter, self.budget], [self.budget.tools]
            async with open_executor(cfg, spec, hooks, tool_hooks, self.budget.charge) as (executor, work):
                self.executor = executor
                await self._drive(plan, work)

    async def _drive(self, plan: Plan, work: Work) -> None:
        cfg = self.cfg
        if self.interrupted or Stop.budget in self.stops:
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
            owner = {name: t.toolset for name, t in all_tools().items()}
            write_manifest(cfg, self.dir, self.toolsets_dropped, self.redact, owner)  # the run has started
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
        self._record_attempts(outcome, batch)
        rec = _summary(outcome, p.key, p.index, self.invocation)
        rec["batch"] = batch
        if p.digest:
            rec["digest"] = p.digest  # a row with an id: a later edit of it is told (plan.make_plan)
        if outcome.timeline:
            self.store.write_timeline({"key": p.key, "inv": self.invocation, "calls": outcome.timeline})
        if isinstance(outcome, Failure):
            error = self.redact.text(outcome.error)
            if outcome.error_type in ENDPOINT_DOWN_ERRORS:
                self._stop(Stop.endpoint_down, error)
            else:
                log.warning("prompt %d failed: %s: %s", p.index, outcome.error_type, error)
            rec.update(error_type=outcome.error_type, error=error)
            if outcome.attempt > 1:
                rec["attempt"] = outcome.attempt  # the last of its in-run attempts
            detail = {"traceback": self.redact.text(outcome.traceback), "prompt": p.prompt[:2000]}
            self.store.write_failure(rec, detail)
            self.state.failed[p.key] = rec
            self.plan_index[p.key] = p.index
            self.stats.add(rec)
            status = "failed"
        else:
            if cfg.scorers and not outcome.scores:
                outcome.scores = unscored(cfg.scorers)  # e.g. a worker of an older version: same keys, "not scored"
            status, reason, summary = classify(outcome, cfg, self.names)
            rec.update(summary, model=outcome.model or cfg.model.name)
            if cfg.scorers:
                rec.update(reward=outcome.reward, scores=ledger_scores(outcome.scores))
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
                reward=outcome.reward,
                scores=outcome.scores,
            )
            self.store.write_trajectory(status, batch, dumps_line(entry), rec)
            self.state.terminal[p.key] = Ref(
                status, rec["file"], rec["offset"], rec["length"], p.index, batch, p.digest, p.sample
            )  # fmt: skip
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
            in_flight = self.executor.in_flight if self.executor else 0
            self.progress.advance(status, outcome.usage, in_flight, outcome.retries, outcome.cache_hits, outcome.saved)

    def _record_attempts(self, outcome: Outcome, batch: int) -> None:
        """The failed in-run attempts before the outcome: each in failures.jsonl (retry.max_attempts)."""
        p = outcome.prompt
        for f in outcome.earlier_failures:
            error = self.redact.text(f.error)
            log.warning("prompt %d attempt %d failed (retrying): %s: %s", p.index, f.attempt, f.error_type, error)
            rec = _summary(f, p.key, p.index, self.invocation)
            rec.update(batch=batch, attempt=f.attempt, error_type=f.error_type, error=error)
            self.store.write_attempt({**rec, "traceback": self.redact.text(f.traceback), "prompt": p.prompt[:2000]})

    def _stop(self, why: Stop, reason: str) -> None:
        """No new prompt starts (those not started stay pending, in-flight prompts finish); said once."""
        if why not in self.stops:
            self.stops[why] = reason
            level, message = _STOP_LOG[why]
            log.log(level, message, reason)
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
        """Ctrl-C / SIGTERM: the first stops gracefully, a second exits at once. SIGUSR1: where the run waits."""

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
        stacks.install(lambda: self._loop)  # kill -USR1: where the run waits (util/stacks.py)

    @staticmethod
    def restore_signals() -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        stacks.uninstall()

    # -- derived outputs -----------------------------------------------------------------

    def write_checkpoint(self) -> None:
        outputs.write_checkpoint(self.dir, self.cfg.run_name, self.state, self.plan_index, self.stats)

    def write_statistics(self, plan: Plan) -> dict:
        return outputs.write_statistics(
            self.dir,
            self.cfg,
            plan,
            self.state,
            self.plan_index,
            self.stats,
            calls=self._calls_now(),
            usage=self.spent(),
            duration_s=past_durations(self.dir) + (time.time() - self.started),
            out_of_scope=self.out_of_scope,
            tool_names=self.names,
            toolsets_dropped=self.toolsets_dropped,
            invocations=self.invocation + 1,
            stopped_by_budget=self.stops.get(Stop.budget),
            this_invocation=self._this_invocation(),
        )

    def _this_invocation(self) -> dict:
        """What this invocation ran: prompts, time, rate; retries, 429s and back-off at the endpoint."""
        t = self.progress.endpoint() if self.progress else self.limiter.throttle() if self.limiter else Throttle()
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

    def finalize(self, plan: Plan) -> dict:
        """Write the derived files; on a full disk, the ones not written are rebuilt by the next run."""
        try:
            self.store.close()
            self.write_checkpoint()
            outputs.write_features(self.dir, self.fill, self.cfg.output.layout)
            kept = outputs.write_trajectories(
                self.dir,
                self.store,
                self.state,
                self.plan_index,
                self.fill,
                self.cfg.output.layout,
                unscored(self.cfg.scorers),
                self.cfg.filters.best_of_k,
            )
            stats = self.write_statistics(plan)
        except OSError as exc:
            self._storage_failed(exc)
            raise self.storage_error from None
        stats["trajectories"] = kept
        return stats


def execute_run(
    cfg: RunConfig,
    run_dir: Path,
    overrides: list[str] | None = None,
    redact: Redactor | None = None,
    on_plan: Callable[[Plan], None] | None = None,
) -> InvocationResult:
    """Plan, run and finalize one invocation; `on_plan` sees the plan before anything runs.

    `redact`: the secrets to keep out of what is written (default: those the overrides and api_key_env name)."""
    redact = redact or Redactor.from_sources(overrides or [], as_container(cfg))
    with redacting_logs(redact):
        try:
            check(cfg)  # before anything is created
        except ConfigError as exc:
            log.error("%s", exc)
            abandon_prelock(run_dir)  # (the CLI took the dir's lock before the job: it leaves no trace)
            return InvocationResult(ExitCode.CONFIG)
        run = Run(cfg, run_dir, overrides, redact)
        result = None
        try:
            result = _invocation(run, cfg, run_dir, overrides or [], on_plan)
            return result
        finally:
            if result is not None and result.code == ExitCode.CONFIG and result.plan is None:
                run.store.abandon()  # refused before its plan: the directory is as it was
            else:
                run.store.unlock()


def _invocation(
    run: Run, cfg: RunConfig, run_dir: Path, overrides: list[str], on_plan: Callable[[Plan], None] | None
) -> InvocationResult:
    started = time.time()
    try:
        plan = run.prepare()
        if not cfg.dry_run:
            start_invocation(run_dir, run.invocation, cfg, overrides, started, run.redact)
    except ConfigError as exc:
        log.error("%s", exc)
        return InvocationResult(ExitCode.CONFIG)
    except OSError as exc:
        if not StorageFull.covers(exc):
            raise
        log.error("%s", StorageFull.of(exc, run_dir))
        return InvocationResult(ExitCode.STORAGE)
    if on_plan is not None:
        on_plan(plan)
    if cfg.dry_run:
        try:
            found = asyncio.run(estimate.dry_run(cfg, run.dir, plan, run.state, run.stats))
        except ConfigError as exc:
            log.error("%s", exc)
            return InvocationResult(ExitCode.CONFIG, plan=plan)
        return InvocationResult(ExitCode.DONE, plan=plan, dry_run=found)
    error: BaseException | None = None
    stats: dict | None = None
    run.install_signals()
    try:
        gctune.started()  # (start-up's objects out of every later collection)
        asyncio.run(run.execute(plan))
    except ConfigError as exc:
        log.error("%s", exc)
        error = exc
    except KeyboardInterrupt:  # Ctrl-C before the run's own handler is in place (e.g. model server starting)
        run.interrupted = True
    except OSError as exc:  # (the run catches its own write errors; this is a full disk seen elsewhere)
        if not StorageFull.covers(exc):
            raise
        run._storage_failed(exc)
    finally:
        try:
            with contextlib.suppress(StorageFull):
                stats = run.finalize(plan)
            with contextlib.suppress(OSError):
                end_invocation(run_dir, run.invocation, started, time.time())
        finally:
            run.restore_signals()
    result = InvocationResult(ExitCode.DONE, stats, plan, interrupted=run.interrupted, stops=dict(run.stops))
    if run.storage_error is not None:
        log.error("%s", run.storage_error)
        result.code = ExitCode.STORAGE
    elif error is not None:
        result.code = ExitCode.CONFIG
    elif run.interrupted:
        result.code = ExitCode.INTERRUPTED
    elif Stop.endpoint_down in run.stops:
        result.code = ExitCode.ENDPOINT_DOWN
    elif Stop.budget in run.stops:
        result.code = ExitCode.BUDGET
    elif nothing_kept(stats) is not None:
        result.code = ExitCode.NOTHING_KEPT
    elif stats["prompts"]["failed"]:
        result.code = ExitCode.FAILED
    return result
