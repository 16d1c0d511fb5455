"""The job behind `run.py`: turn a composed config into a run (run/) and print it: the plan, the summary, the
closing lines and the exit code."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue
from rich.console import Console

from hermes_runner.commands import refusal
from hermes_runner.config import DistributionConfig, as_container, check_keys, run_name_problem
from hermes_runner.config.root import RunConfig
from hermes_runner.errors import ENDPOINT_DOWN_ERRORS, ConfigError, ExitCode, JobNotStarted, RunDirBusy
from hermes_runner.rundir.layout import HYDRA_DIR, REJECTED, STATISTICS, TRAJECTORIES
from hermes_runner.rundir.store import abandon_prelock, prelock
from hermes_runner.util.console import FILE_ONLY, file_handlers, stdout_console
from hermes_runner.util.redact import Redactor

if TYPE_CHECKING:  # (imported where used: a listing or --help loads no agent, model, report or dataset code)
    from hermes_runner.run.invocation import InvocationResult
    from hermes_runner.run.plan import Plan

log = logging.getLogger("hermes_runner")
CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


class RunDirGuard(Callback):
    """Takes the run dir's lock before Hydra makes it, so a second runner of a live run is refused without
    touching that run's directory (exit 2). Hydra writes no `.hydra/` (hydra.output_subdir is null) and run.log
    waits: `accept_run_dir` writes both once the run's checks of its directory passed."""

    def on_run_start(self, config: DictConfig, **kwargs: object) -> None:
        if config.get("list_distributions"):
            return
        try:
            check_keys(config)  # `+num_worker=8`: refused before Hydra creates the run dir
            check_run_name(config)  # `run_name=../../x`: the same
        except ConfigError as exc:
            raise SystemExit(refusal(exc)) from None
        try:
            run_dir = Path(str(OmegaConf.select(config, "hydra.run.dir")))
        except Exception:  # noqa: BLE001 - a dir that only the job can resolve: the job's own lock guards it
            return
        try:
            prelock(run_dir)
        except RunDirBusy as exc:
            raise SystemExit(refusal(f"{exc}: one run directory takes one runner at a time")) from None
        except OSError:
            return  # (the job reports what is wrong with the directory)


def check_run_name(config: DictConfig, values: list[str] | None = None) -> None:
    """ConfigError when the config's run_name (or one of `values`, a sweep's) is no plain directory name."""
    names = values if values is not None else [OmegaConf.select(config, "run_name", default="", throw_on_missing=False)]
    for name in names:
        if name is not None and (why := run_name_problem(name)) is not None:
            raise ConfigError(why)


def load_distributions() -> list[DistributionConfig]:
    out = []
    schema = OmegaConf.structured(DistributionConfig)
    for path in sorted((CONF_DIR / "distribution").glob("*.yaml")):
        node = OmegaConf.load(path)
        node.pop("defaults", None)
        out.append(OmegaConf.to_object(OmegaConf.merge(schema, node)))
    return out


def say(console: Console, text: str, **kwargs: object) -> None:
    """Print a line for the user and put it in the run's log file (run.log) too."""
    from rich.text import Text

    console.print(text, **kwargs)
    plain = Text.from_markup(text).plain if kwargs.get("markup", True) else text
    for line in plain.strip("\n").splitlines():
        log.info("%s", line, extra={FILE_ONLY: True})


def print_plan(console: Console, cfg: RunConfig, plan: Plan, run_dir: Path) -> None:
    k = cfg.samples_per_prompt
    scope = f"{plan.total} prompts in scope" + (f" ({plan.total // k} rows x {k} samples)" if k > 1 else "")
    say(
        console,
        f"[bold]{cfg.run_name}[/]: {scope}, {plan.done} already done, "
        f"{plan.to_run} to run"
        + (f" ({plan.retry} retries of failed prompts)" if plan.retry else "")
        + (f", {plan.skipped_failed} failed left alone" if plan.skipped_failed else "")
        + (f", {plan.rejected} bad lines (see {run_dir / REJECTED})" if plan.rejected else ""),
    )


def _by(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def summary_lines(stats: dict, run_dir: Path, retry_failed: bool = True) -> list[str]:
    """The end summary (rich markup): outcomes that add up, this invocation's pace and endpoint trouble,
    where the failures are and how to retry them."""
    p = stats["prompts"]
    stopped = stats.get("stopped_reasons") or {}
    kept = f"{p['ok']} kept = {p['completed']} completed + {p['partial']} partial + {p['stopped']} stopped" + (
        f" ({_by(stopped)})" if p["stopped"] and stopped else ""
    )
    lines = [
        f"\n[bold]Done[/]: {kept}; {p['discarded']} discarded"
        + (f" ({_by(stats['discarded_by_reason'])})" if stats["discarded_by_reason"] else "")
        + f"; {p['failed']} failed"
        + (f" ({_by(stats['failed_by_error'])})" if stats["failed_by_error"] else "")
        + f"; {p['pending']} pending; of {p['total']} prompts"
    ]
    if stats.get("stop_reasons"):
        lines.append("  stop reasons (kept): " + _by(stats["stop_reasons"]))
    if (limit := stats.get("answered_at_limit") or {}).get("prompts"):
        lines.append(
            f"  answered at a limit: {limit['prompts']} ({_by(limit['by_limit'])}); in pass@k counted as "
            + _by(limit["counted_as"])
        )
    gone = stats.get("not_in_dataset") or {}
    if gone.get("prompts"):
        lines.append(
            f"  [yellow]{gone['prompts']} recorded prompts are not in the current dataset[/] (rows edited or removed):"
            " left out of trajectories.jsonl and these counts; their records stay in ledger.jsonl and the batch files"
        )
    inv = stats.get("invocation")
    if inv:
        lines.append(
            f"  this invocation: {inv['prompts']} prompts in {inv['seconds']:.1f}s ({inv['prompts_per_s']:.2f} prompts/s);"
            f" model calls: {stats['api_calls']:,} in all, {inv['retries']} retries, {inv['rate_limited']} 429s,"
            f" {inv['backoff_seconds']:.1f}s backing off"
        )
    if lost := (stats.get("model_calls") or {}).get("unanswered"):
        lines.append(
            f"  {lost:,} model calls were sent and never answered (their prompts cancelled, their worker or node"
            " lost, the runner or its job killed): in usage.jsonl, not in the counts above"
        )
    if p["failed"]:
        again = (
            "run the same command again to retry them"
            if retry_failed
            else "they are left alone on reruns (retry_failed=false): rerun with retry_failed=true to retry them"
        )
        lines.append(f"  [red]{p['failed']} prompts failed[/]: details in {run_dir / 'failures.jsonl'}; {again}")
    return lines


def print_summary(console: Console, stats: dict, run_dir: Path, retry_failed: bool = True) -> None:
    from rich.table import Table

    for line in summary_lines(stats, run_dir, retry_failed):
        say(console, line)
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
    say(
        console,
        f"Reasoning coverage: {r['coverage_percent']:.1f}% of {r['total_assistant_turns']} assistant turns. "
        f"Tokens: {u['total_tokens']:,} ({u['prompt_tokens']:,} in, {u['completion_tokens']:,} out)"
        + (f", cost ${u['cost_usd']:.4f}" if u["cost_usd"] else "")
        + f". Run time {stats['duration_seconds']:.1f}s.",
    )
    if (c := stats.get("cache") or {}).get("hits"):  # (a statistics.json of an older runner has none)
        saved = f"{c['tokens_saved']:,} tokens" + (f", ${c['cost_saved_usd']:.4f}" if c["cost_saved_usd"] else "")
        say(console, f"Response cache: {c['hits']:,} calls replayed, not paid again ({saved} saved).")
    say(console, f"Trajectories: [bold]{run_dir / TRAJECTORIES}[/] ({stats['trajectories']} entries)")
    say(console, f"Statistics:   {run_dir / STATISTICS}")
    # (seam: a scored run's results table is printed after this summary, by print_result)


def _pm(value: float | None, err: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" + (f" ± {err:.3f}" if err is not None else "")


def print_results(console: Console, stats: dict) -> None:
    """The results table (results_table=true, as +experiment=evaluation sets): a row per model and scorer; with
    k > 1 samples per row, a second table gives pass@j and pass^j for every j <= k."""
    from rich.table import Table

    results = stats.get("results")
    if not results:
        console.print("Results: no scores recorded (configure a scorer: docs/scoring.md)")
        return
    k = results[0]["k"]
    table = Table(title="Results (± standard error across rows)")
    for col in ("model", "scorer", "n", "pass@1", f"pass@{k}", f"pass^{k}", "tokens", "cost"):
        table.add_column(col, justify="left" if col in ("model", "scorer") else "right")
    for r in results:
        table.add_row(
            r["model"],
            r["scorer"],
            str(r["n"]),
            _pm(r["pass_at_1"], r["pass_at_1_se"]),
            _pm(r["pass_at_k"], r["pass_at_k_se"]),
            _pm(r.get("pass_hat_k"), r.get("pass_hat_k_se")),  # (a statistics.json of an older runner has none)
            f"{r['tokens']:,}",
            f"${r['cost_usd']:.4f}",
        )
    console.print(table)
    if k > 1 and all(r.get("by_k") for r in results):
        console.print(_by_k_table(results))


def _by_k_table(results: list[dict]):
    """pass@j and pass^j for every j <= k: a row per model, scorer and j."""
    from rich.table import Table

    table = Table(title="pass@k (some of k samples passes) and pass^k (all k pass), for every k")
    for col in ("model", "scorer", "k", "rows", "pass@k", "pass^k"):
        table.add_column(col, justify="left" if col in ("model", "scorer") else "right")
    for r in results:
        for e in r["by_k"]:
            pass_at, pass_hat = _pm(e["pass_at_k"], e["pass_at_k_se"]), _pm(e["pass_hat_k"], e["pass_hat_k_se"])
            table.add_row(r["model"], r["scorer"], str(e["k"]), str(e["rows"]), pass_at, pass_hat)
    return table


def run_job(dcfg: DictConfig) -> int:
    """Run one Hydra job; in a single run exit with its ExitCode (errors.py)."""
    logging.raiseExceptions = False  # a log file on a full disk must not print a traceback per line
    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    code = _run_job(dcfg)
    if multirun:
        from hermes_runner.report.page import write_report_quietly

        write_report_quietly(HydraConfig.get().sweep.dir)  # the sweep's page, with the jobs done so far
        if code == ExitCode.CONFIG:
            raise _not_started(HydraConfig.get())
        return code
    if code:
        sys.exit(code)
    return 0


def _not_started(hc: DictConfig) -> JobNotStarted:
    """The sweep job's refusal, with where its error is: the launcher's log of the job (submitit writes each
    job's stderr to `.submitit/<id>/<id>_0_log.err`) or else the job's run.log."""
    submitit = sys.modules.get("submitit")
    env = submitit.JobEnvironment() if submitit is not None else None
    if env is not None and env.activated():  # (its tail is shown by the sweep: nothing of it reached the terminal)
        log_path, tail = str(env.paths.stderr), str(env.paths.stderr)
    else:  # (the error is on the terminal above)
        log_path, tail = str(Path(hc.runtime.output_dir) / f"{hc.job.name}.log"), None
    return JobNotStarted(f"sweep job {hc.sweep.subdir} did not start (a bad config or input): see {log_path}", tail)


def _run_job(dcfg: DictConfig) -> int:
    console = stdout_console()
    if dcfg.get("list_distributions"):
        from hermes_runner.tools import distributions

        accept_run_dir(dcfg)  # (a listing refuses no directory: Hydra's files as before)
        console.print(distributions.describe(load_distributions()), markup=False)
        return 0
    try:
        check_keys(dcfg)
        cfg: RunConfig = OmegaConf.to_object(dcfg)
    except (ConfigError, MissingMandatoryValue) as exc:
        if isinstance(exc, MissingMandatoryValue):
            key = exc.full_key
            log.error("missing a required option: %s (set it on the command line, e.g. %s=...)", key, key)
        else:
            log.error("%s", exc)
        refuse_run_dir(multirun=HydraConfig.get().mode == RunMode.MULTIRUN)
        abandon_prelock(Path(HydraConfig.get().runtime.output_dir))
        return ExitCode.CONFIG
    hc = HydraConfig.get()
    overrides = list(hc.overrides.task)
    redact = Redactor.from_sources(OmegaConf.to_container(dcfg, resolve=False), overrides, as_container(cfg))
    accepted = False

    def accept() -> None:
        nonlocal accepted
        accepted = True
        accept_run_dir(dcfg)

    code, _ = run_and_print(cfg, Path(hc.runtime.output_dir), overrides, console, redact, on_accept=accept)
    if not accepted:
        refuse_run_dir(multirun=hc.mode == RunMode.MULTIRUN)
    return code


def accept_run_dir(dcfg: DictConfig) -> None:
    """The run dir is the run's (its checks passed): write what Hydra was kept from writing before (`.hydra/`,
    hydra.output_subdir is null) and open run.log (util/console.DeferredFileHandler) with what waited."""
    hc = HydraConfig.get()
    where = Path(hc.runtime.output_dir) / HYDRA_DIR
    where.mkdir(parents=True, exist_ok=True)
    saved = {"config.yaml": dcfg, "hydra.yaml": HydraConfig.instance().cfg, "overrides.yaml": hc.overrides.task}
    for name, node in saved.items():
        (where / name).write_text(OmegaConf.to_yaml(node), encoding="utf-8")
    for handler in file_handlers():
        handler.open()


def refuse_run_dir(multirun: bool) -> None:
    """The run refused its dir (or its config) before using it: run.log gets nothing of it, but for a sweep's job,
    whose log the sweep's error points at (`_not_started`)."""
    for handler in file_handlers():
        handler.open() if multirun else handler.discard()


def run_and_print(
    cfg: RunConfig,
    run_dir: Path,
    overrides: list[str] | None = None,
    console: Console | None = None,
    redact: Redactor | None = None,
    on_accept: Callable[[], None] | None = None,
) -> tuple[int, dict | None]:
    """`run.execute_run`, printed: the plan, the dry run or the summary and the report; (exit code, statistics).
    `on_accept` is called once the run has accepted its directory (before the plan is printed)."""
    from hermes_runner.run import invocation

    console = console or stdout_console()

    def on_plan(plan: Plan) -> None:
        if on_accept is not None:
            on_accept()
        print_plan(console, cfg, plan, run_dir)

    result = invocation.execute_run(cfg, run_dir, overrides, redact, on_plan=on_plan)
    print_result(console, result, run_dir, results_table=cfg.results_table, retry_failed=cfg.retry_failed)
    return result.code, result.stats


def print_result(
    console: Console, result: InvocationResult, run_dir: Path, results_table: bool = False, retry_failed: bool = True
) -> None:
    """The lines after the plan: the dry run's findings, or the summary, the report and why the run stopped."""
    from hermes_runner.report.page import write_report_quietly
    from hermes_runner.run.discards import nothing_kept
    from hermes_runner.run.invocation import Stop

    if result.dry_run is not None:
        console.print(result.dry_run, markup=False)
        console.print("dry_run=true: nothing was run.")
    stats, code = result.stats, result.code
    if stats is None or code == ExitCode.STORAGE:
        return
    if code != ExitCode.CONFIG:
        print_summary(console, stats, run_dir, retry_failed)
        if results_table:  # a scored run's results table, after the summary
            print_results(console, stats)
    if (report := write_report_quietly(run_dir)) is not None:
        say(console, f"Report:       {report}")
    if code == ExitCode.INTERRUPTED:
        say(console, "[yellow]Interrupted.[/] Run the same command again to finish the remaining prompts.")
    elif code == ExitCode.ENDPOINT_DOWN:
        failed = sum(stats["failed_by_error"].get(t, 0) for t in ENDPOINT_DOWN_ERRORS)
        why = result.stops.get(Stop.endpoint_down)
        if why is None:  # the circuit breaker gave up: the prompts it held failed, a rerun retries them
            why, failed = f"the circuit breaker stayed open: {result.stops[Stop.breaker]}", stats["prompts"]["failed"]
        left = stats["prompts"]["pending"] + failed
        say(console, f"Stopped: {why}", style="bold red", markup=False)
        say(console, f"{left} prompts left to run: fix the endpoint, then run the same command again.")
    elif code == ExitCode.BUDGET:
        say(
            console,
            f"[yellow]Stopped by budget[/]: {result.stops[Stop.budget]}. "
            "Run the same command with a higher limit to continue.",
        )
    elif code == ExitCode.NOTHING_KEPT:
        log.error("%s", nothing_kept(stats))
