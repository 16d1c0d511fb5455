"""The job behind `run.py`: turn a composed config into a run and report it."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue
from rich.console import Console
from rich.table import Table

from hermes_runner import distributions
from hermes_runner.config import DistributionConfig, RunConfig
from hermes_runner.discards import NOTHING_KEPT, nothing_kept
from hermes_runner.errors import ConfigError
from hermes_runner.manifest import record_invocation
from hermes_runner.plan import Plan
from hermes_runner.report import write_report_quietly
from hermes_runner.runner import Run

log = logging.getLogger("hermes_runner")
CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


def load_distributions() -> list[DistributionConfig]:
    out = []
    schema = OmegaConf.structured(DistributionConfig)
    for path in sorted((CONF_DIR / "distribution").glob("*.yaml")):
        node = OmegaConf.load(path)
        node.pop("defaults", None)
        out.append(OmegaConf.to_object(OmegaConf.merge(schema, node)))
    return out


def print_plan(console: Console, cfg: RunConfig, plan: Plan, run_dir: Path) -> None:
    console.print(
        f"[bold]{cfg.run_name}[/]: {plan.total} prompts in scope, {plan.done} already done, "
        f"{plan.to_run} to run"
        + (f" ({plan.retry} retries of failed prompts)" if plan.retry else "")
        + (f", {plan.skipped_failed} failed left alone" if plan.skipped_failed else "")
        + (f", {plan.rejected} bad lines (see {run_dir / 'rejected.jsonl'})" if plan.rejected else "")
    )


def print_summary(console: Console, stats: dict, run_dir: Path) -> None:
    p = stats["prompts"]
    console.print(
        f"\n[bold]Done[/]: {p['ok']} kept ({p['completed']} completed, {p['partial']} partial), "
        f"{p['discarded']} discarded, {p['failed']} failed, {p['pending']} pending of {p['total']}"
    )
    if stats["discarded_by_reason"]:
        console.print("  discarded: " + ", ".join(f"{k} {v}" for k, v in stats["discarded_by_reason"].items()))
    if stats["failed_by_error"]:
        console.print("  failed: " + ", ".join(f"{k} {v}" for k, v in stats["failed_by_error"].items()))
    table = Table(title="Tool use (kept trajectories)")
    for col in ("tool", "calls", "success", "failure", "success %"):
        table.add_column(col, justify="left" if col == "tool" else "right")
    for name, t in sorted(stats["tool_statistics"].items(), key=lambda kv: -kv[1]["count"]):
        if t["count"]:
            table.add_row(name, str(t["count"]), str(t["success"]), str(t["failure"]), f"{t['success_rate']:.1f}")
    if table.row_count:
        console.print(table)
    r = stats["reasoning_statistics"]
    u = stats["usage"]
    console.print(
        f"Reasoning coverage: {r['coverage_percent']:.1f}% of {r['total_assistant_turns']} assistant turns. "
        f"Tokens: {u['total_tokens']:,} ({u['prompt_tokens']:,} in, {u['completion_tokens']:,} out)"
        + (f", cost ${u['cost_usd']:.4f}" if u["cost_usd"] else "")
        + f". Run time {stats['duration_seconds']:.1f}s."
    )
    console.print(f"Trajectories: [bold]{run_dir / 'trajectories.jsonl'}[/] ({stats['trajectories']} entries)")
    console.print(f"Statistics:   {run_dir / 'statistics.json'}")


def run_job(dcfg: DictConfig) -> int:
    """Run one Hydra job; in a single run exit with 0 (done), 1 (some prompts failed), 2 (bad input or
    config), 3 (stopped by a budget), 4 (prompts ran but every trajectory was discarded), 130 (interrupted)."""
    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    code = _run_job(dcfg)
    if multirun:
        write_report_quietly(HydraConfig.get().sweep.dir)  # the sweep's page, with the jobs done so far
        if code == 2:
            raise RuntimeError("the job did not start; see the error above")
        return code
    if code:
        sys.exit(code)
    return 0


def _run_job(dcfg: DictConfig) -> int:
    console = Console(soft_wrap=True)
    if dcfg.get("list_distributions"):
        console.print(distributions.describe(load_distributions()), markup=False)
        return 0
    try:
        cfg: RunConfig = OmegaConf.to_object(dcfg)
    except MissingMandatoryValue as exc:
        log.error("missing a required option: %s (set it on the command line, e.g. %s=...)", exc.full_key, exc.full_key)
        return 2
    hc = HydraConfig.get()
    code, _ = execute_run(cfg, Path(hc.runtime.output_dir), list(hc.overrides.task), console)
    return code


def execute_run(
    cfg: RunConfig, run_dir: Path, overrides: list[str] | None = None, console: Console | None = None
) -> tuple[int, dict | None]:
    """Plan, run and finalize one invocation; return (exit code, statistics)."""
    console = console or Console(soft_wrap=True)
    run = Run(cfg, run_dir, overrides)
    try:
        return _invocation(run, cfg, run_dir, overrides or [], console)
    finally:
        run.store.unlock()


def _invocation(
    run: Run, cfg: RunConfig, run_dir: Path, overrides: list[str], console: Console
) -> tuple[int, dict | None]:
    started = time.time()
    try:
        plan = run.prepare()
    except ConfigError as exc:
        log.error("%s", exc)
        return 2, None
    print_plan(console, cfg, plan, run_dir)
    if cfg.dry_run:
        try:
            console.print(asyncio.run(run.dry_run(plan)), markup=False)
        except ConfigError as exc:
            log.error("%s", exc)
            return 2, None
        console.print("dry_run=true: nothing was run.")
        return 0, None
    error: BaseException | None = None
    run.install_signals()
    try:
        asyncio.run(run.execute(plan))
    except ConfigError as exc:
        log.error("%s", exc)
        error = exc
    except KeyboardInterrupt:  # Ctrl-C before the run's own handler is in place (e.g. model server starting)
        run.interrupted = True
    finally:
        try:
            stats = run.finalize(plan)
            record_invocation(run_dir, run.invocation, cfg, overrides, started, time.time())
        finally:
            run.restore_signals()
        if error is None:
            print_summary(console, stats, run_dir)
    if (report := write_report_quietly(run_dir)) is not None:
        console.print(f"Report:       {report}")
    if error is not None:
        return 2, stats
    if run.interrupted:
        console.print("[yellow]Interrupted.[/] Run the same command again to finish the remaining prompts.")
        return 130, stats
    if run.budget_stop:
        console.print(
            f"[yellow]Stopped by budget[/]: {run.budget_stop}. Run the same command with a higher limit to continue."
        )
        return 3, stats
    if (warning := nothing_kept(stats)) is not None:
        log.error("%s", warning)
        return NOTHING_KEPT, stats
    return (1 if stats["prompts"]["failed"] else 0), stats
