"""One invocation of a run: prepare, drive, finalize; `execute_run` runs one start to end and gives its exit code.

It returns an `InvocationResult` (exit code, statistics, plan, why it stopped) and prints nothing: commands/job.py
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

from hermes_runner.config import as_container, check
from hermes_runner.config.root import RunConfig
from hermes_runner.dataset import Prompt
from hermes_runner.errors import ConfigError, ExitCode, RunDirBusy, StorageFull
from hermes_runner.executors import Executor, Work
from hermes_runner.model.ratelimit import EndpointLimiter, Throttle
from hermes_runner.model.serve import serving
from hermes_runner.run import estimate, outputs, wiring
from hermes_runner.run.breaker import Breaker, Guard, NotStarted, Probe, endpoint_probe
from hermes_runner.run.budget import CURRENT_PROMPT
from hermes_runner.run.discards import nothing_kept
from hermes_runner.run.feed import open_feed
from hermes_runner.run.plan import Plan, make_plan, pending
from hermes_runner.run.progress import RunProgress
from hermes_runner.run.record import Recorder
from hermes_runner.run.spend import Spend
from hermes_runner.run.watch import SessionWatch
from hermes_runner.rundir import hermes_import, manifest
from hermes_runner.rundir.stats import RunStats
from hermes_runner.rundir.store import LedgerState, RunStore, abandon_prelock, remove_stale_temps
from hermes_runner.scorers import code_versions, unscored
from hermes_runner.tools.catalog import all_tools, stats_names, tool_names
from hermes_runner.util import gctune, stacks
from hermes_runner.util.redact import Redactor, redacting_logs

log = logging.getLogger(__name__)

CHECKPOINT_EVERY_S = 10.0


class Stop(str, Enum):
    """Why no new prompt starts (in-flight prompts finish; those not started stay pending)."""

    endpoint_down = "endpoint_down"  # the endpoint refused connections or credentials
    budget = "budget"  # limits.max_cost_usd or limits.max_tokens_total reached
    breaker = "breaker"  # the circuit breaker stayed open breaker.give_up_s


_STOP_LOG = {
    Stop.endpoint_down: (logging.ERROR, "no new prompt starts, the model endpoint can serve none: %s"),
    Stop.budget: (logging.WARNING, "budget: %s; no new prompt starts, in-flight prompts finish"),
    Stop.breaker: (logging.ERROR, "breaker: gave up waiting for recovery: %s; no new prompt starts"),
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
    """State of one invocation of a run: prepare, execute (drive, record), finalize; its signals (`install_signals`)."""

    def __init__(self, cfg: RunConfig, run_dir: Path, redact: Redactor | None = None):
        self.cfg = cfg
        self.dir = Path(run_dir)
        self.redact = redact or Redactor()
        self.storage_error: StorageFull | None = None  # the run dir could not be written: the run stops
        self.out_of_scope = 0  # prompts of the ledger that are not in the current dataset
        self.store = RunStore(self.dir)
        self.spend = Spend(self.store)  # usage.jsonl: every model call of the run
        self.stats = RunStats()
        self.names = tool_names()
        self.started = time.time()
        self.interrupted = False
        self.stops: dict[Stop, str] = {}  # why no new prompt starts any more
        self.limiter: EndpointLimiter | None = None
        self.executor: Executor | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.main: asyncio.Task | None = None
        self.progress: RunProgress | None = None
        self.breaker = Breaker(cfg.breaker, cfg.num_workers, on_give_up=functools.partial(self._stop, Stop.breaker))
        self.watch = SessionWatch(cfg.breaker.silent_after_s)  # sessions gone silent
        self._silent = ""  # the watch's last note
        self.guard: Guard | None = None  # each prompt's work behind the breaker
        self.toolsets_dropped: dict[str, str] = {}  # toolset -> missing backend
        self.fill: list[str] = []  # the tool_stats keys of the entries
        self.prefill: list[dict] = []  # prefill_messages_file
        self.invocation = -1  # this invocation's number in run.json
        self.data: dict = {}  # the options that define the run's data (run.json)
        self.state: LedgerState | None = None  # what the ledger holds
        self.plan_index: dict[str, int] = {}  # recorded key -> its index in the current dataset

    def prepare(self) -> Plan:
        cfg = self.cfg  # its values passed config.check before this Run was made
        self.prefill, self.toolsets_dropped = wiring.check_inputs(cfg)  # nothing said before the input files
        self.fill = stats_names(set(cfg.distribution.toolsets) - set(self.toolsets_dropped))  # tool_stats keys
        try:
            self.store.lock(claim=False)
        except RunDirBusy as exc:
            raise ConfigError(f"{exc}: one run directory takes one runner at a time") from None
        # The directory's checks, before anything in it changes: a refused directory stays as it was.
        adopted = hermes_import.adopt(self.dir, cfg.dataset_file, cfg.dataset, cfg.resume, write=not cfg.dry_run)
        self.data = self.redact(manifest.data_config(as_container(cfg), self.toolsets_dropped))  # run.json's
        self.invocation = manifest.open_run(self.dir, self.data, cfg.run_name, cfg.resume, cfg.force_resume)
        self.store.claim()  # the directory is the run's
        remove_stale_temps(self.dir)
        self.state = self.store.load(on_record=self.stats.add)
        if cfg.dry_run:
            hermes_import.preview(self.state, adopted, self.stats.add)
        plan = make_plan(cfg, self.state, self.dir, note=None if cfg.dry_run else self.store.write_note)
        self.plan_index = idx = plan.current_index
        self.spend.calls = self.store.load_calls(self.state.attempts)
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

    def _record_call(self, rec: dict) -> None:
        """A model call started or ended: into usage.jsonl, as it happens."""
        if not self.storage_error:
            try:
                self.spend.record(rec)
            except OSError as exc:
                self._storage_failed(exc)

    def _storage_failed(self, exc: OSError) -> None:
        """The run dir cannot be written (a full disk, ...): nothing more starts, in-flight prompts are cancelled."""
        if self.storage_error is None:
            self.storage_error = StorageFull.of(exc, self.dir)
            log.debug("storage error", exc_info=exc)
        if self.executor is not None:
            self.executor.cancel()

    async def execute(self, plan: Plan) -> None:
        cfg, self.loop, self.main = self.cfg, asyncio.get_running_loop(), asyncio.current_task()
        try:
            async with serving(cfg.model, self.dir) as served_url:
                spent, on_budget = self.spend.total(self.stats.usage), functools.partial(self._stop, Stop.budget)
                self.limiter, budget = wiring.meters(cfg, spent, on_budget, self._record_call, self.invocation)
                spec = wiring.worker_spec(cfg, self.dir, self.prefill, served_url, plan.images, self.toolsets_dropped)
                watchers = (self.breaker, self.watch)
                async with wiring.executor(cfg, spec, self.limiter, budget, watchers) as (executor, work):
                    self.executor = executor
                    if not self.interrupted and Stop.budget not in self.stops:
                        await self._drive(plan, work, endpoint_probe(cfg.model, served_url))
        except asyncio.CancelledError:
            if not self.interrupted:
                raise
            log.warning("interrupted while starting: nothing was run")

    async def _drive(self, plan: Plan, work: Work, probe: Probe) -> None:
        cfg, executor = self.cfg, self.executor
        self.limiter.on_concurrency = executor.set_limit
        first_batch = self.state.next_batch
        recorder = Recorder(
            self.store, self.state, self.stats, self.plan_index, self.redact, self.invocation, cfg.filters,
            cfg.scorers, self.names, cfg.model.name, cfg.batch_size, first_batch, plan.to_run,
            functools.partial(self._stop, Stop.endpoint_down), cfg.verbose, cfg.limits.at_limit,
        )  # fmt: skip
        batch_of: dict[str, int] = {}
        self.guard = guard = Guard(self.breaker, self.watch.started, self.watch.ended)  # waits while it is open
        feed = open_feed(
            cfg.feed, self.dir, cfg.samples_per_prompt, bool(cfg.scorers)
        )  # feed=atropos: groups to the trainer

        def items() -> Iterator[Prompt]:
            for p, b in pending(cfg, self.state, first_batch):
                batch_of[p.key] = b
                yield p

        async def session(p: Prompt):
            CURRENT_PROMPT.set(p.key)  # (in this session's own task: its model calls are recorded under it)
            if feed is not None:
                await feed.wait_room()  # back-pressure: the trainer's queue is full
            return await guard.run(p, work)

        try:
            owner = {name: t.toolset for name, t in all_tools().items()}
            manifest.write_manifest(self.dir, self.data, cfg.run_name, owner)  # the run has started
        except OSError as exc:
            self._storage_failed(exc)
            return
        syncer = asyncio.ensure_future(self._sync_loop())
        prober = asyncio.ensure_future(self.breaker.probing(probe))
        self.progress = wiring.progress(cfg, plan.to_run, self.limiter, self._notes)
        try:
            if feed is not None:
                await feed.start()
            with self.progress:
                async for outcome in executor.map_unordered(session, items()):
                    batch = batch_of.pop(outcome.prompt.key)
                    if isinstance(outcome, NotStarted):
                        continue  # the breaker gave up before it started: it stays pending
                    if self.storage_error:
                        continue  # draining: the prompt runs again next time
                    try:
                        status = recorder.record(outcome, batch)
                    except OSError as exc:
                        self._storage_failed(exc)
                        continue
                    self.spend.settled(outcome.prompt.key)  # its spend is in the record now
                    if feed is not None:
                        await feed.finished(outcome, status)
                    o = outcome
                    self.progress.advance(status, o.usage, executor.in_flight, o.retries, o.cache_hits, o.saved)
        finally:
            for task in (syncer, prober):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if feed is not None:
                await feed.close()

    def _stop(self, why: Stop, reason: str) -> None:
        """No new prompt starts (those not started stay pending, in-flight prompts finish); said once."""
        if why not in self.stops:
            self.stops[why] = reason
            level, message = _STOP_LOG[why]
            log.log(level, message, reason)
        if self.executor:
            self.executor.stop()

    def _notes(self) -> str:
        """The progress line's note: the breaker open, the sessions gone silent."""
        breaker, held = self.breaker.describe(), self.guard.held if self.guard else 0
        if breaker and held:
            breaker += f", {held} prompts to run again"
        return " | ".join(n for n in (breaker, self._silent) if n)

    async def _sync_loop(self) -> None:
        last_ckpt = last_watch = time.monotonic()
        while True:
            await asyncio.sleep(self.cfg.fsync_interval_s)
            if time.monotonic() - last_watch >= 1.0:
                last_watch, self._silent = time.monotonic(), self.watch.check()
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

    def write_checkpoint(self) -> None:
        outputs.write_checkpoint(self.dir, self.cfg.run_name, self.state, self.plan_index, self.stats)

    def write_statistics(self, plan: Plan) -> dict:
        t = self.progress.endpoint() if self.progress else self.limiter.throttle() if self.limiter else Throttle()
        ran, seconds = self.progress.done if self.progress else 0, time.time() - self.started
        return outputs.write_statistics(
            self.dir, self.cfg, plan, self.state, self.plan_index, self.stats,
            calls=self.spend.now(), usage=self.spend.total(self.stats.usage),
            duration_s=manifest.past_durations(self.dir) + seconds, out_of_scope=self.out_of_scope,
            tool_names=self.names, toolsets_dropped=self.toolsets_dropped, invocations=self.invocation + 1,
            stopped_by_budget=self.stops.get(Stop.budget), this_invocation=outputs.pace(ran, seconds, t),
        )  # fmt: skip

    def finalize(self, plan: Plan) -> dict:
        """Write the derived files; on a full disk, the ones not written are rebuilt by the next run."""
        cfg = self.cfg
        try:
            self.store.close()
            self.write_checkpoint()
            outputs.write_features(self.dir, self.fill, cfg.output.layout)
            kept = outputs.write_trajectories(
                self.dir, self.store, self.state, self.plan_index, self.fill, cfg.output.layout,
                unscored(cfg.scorers), cfg.filters.best_of_k,
            )  # fmt: skip
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
        run = Run(cfg, run_dir, redact)
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
            code = code_versions(cfg.scorers)  # (python scorers: their own code's version, for the provenance)
            manifest.start_invocation(run_dir, run.invocation, as_container(cfg), overrides, started, run.redact, code)
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
    return _execute(run, plan, started)


def install_signals(run: Run) -> None:
    """The first Ctrl-C / SIGTERM cancels the in-flight prompts of `run` (or its start), a second exits at once;
    SIGUSR1 tells where it waits (util/stacks.py)."""

    def on_signal(signum: int, frame: object) -> None:
        if run.interrupted:
            os.write(2, b"second interrupt: exiting now (a rerun resumes; leftovers are cleaned at its start)\n")
            os._exit(130)
        run.interrupted = True
        os.write(2, b"interrupted: cancelling in-flight prompts and saving progress (again to exit now)\n")
        if run.loop is not None and run.executor is not None:
            run.loop.call_soon_threadsafe(run.executor.cancel)
        elif run.loop is not None and run.main is not None:
            run.loop.call_soon_threadsafe(run.main.cancel)  # still starting (model server, images, ...)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    stacks.install(lambda: run.loop)


def restore_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    stacks.uninstall()


def _execute(run: Run, plan: Plan, started: float) -> InvocationResult:
    """Run the plan, then write the derived files; the result's exit code says how it ended."""
    error: BaseException | None = None
    stats: dict | None = None
    install_signals(run)
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
                manifest.end_invocation(run.dir, run.invocation, started, time.time())
        finally:
            restore_signals()
    result = InvocationResult(ExitCode.DONE, stats, plan, interrupted=run.interrupted, stops=dict(run.stops))
    if run.storage_error is not None:
        log.error("%s", run.storage_error)
        result.code = ExitCode.STORAGE
    elif error is not None:
        result.code = ExitCode.CONFIG
    elif run.interrupted:
        result.code = ExitCode.INTERRUPTED
    elif Stop.endpoint_down in run.stops or Stop.breaker in run.stops:
        result.code = ExitCode.ENDPOINT_DOWN
    elif Stop.budget in run.stops:
        result.code = ExitCode.BUDGET
    elif nothing_kept(stats) is not None:
        result.code = ExitCode.NOTHING_KEPT
    elif stats["prompts"]["failed"]:
        result.code = ExitCode.FAILED
    return result
