"""The launchers of `hydra/launcher=local` and `hydra/launcher=slurm`: hydra-submitit-launcher's, but the sweep
waits for its jobs itself. Every job's outcome (its exit code, or how SLURM ended it: cancelled, timed out, node
lost) is written to the sweep's `jobs.jsonl` by the sweep, pending jobs are reported with SLURM's reason while it
waits, and a job that no node of the partition could run is refused before anything is submitted.

SLURM is asked with `squeue` (it knows a job until MinJobAge after its end), never `sacct`: a cluster without
accounting has none, and submitit's own polling would warn `Bypassing sacct error` on every poll.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_submitit_launcher import submitit_launcher

from hermes_runner.errors import ConfigError, ExitCode
from hermes_runner.rundir import sweep

log = logging.getLogger(__name__)

POLL_S = (1.0, 30.0)  # between two looks at the jobs (result files, squeue): from 1 s, growing to 30 s
GONE_POLLS = 5  # a job SLURM no longer knows, without a result, after this many polls: lost
# SLURM's ending states of a job that wrote no result -> (status in jobs.jsonl, exit code)
SLURM_ENDINGS = {
    "CANCELLED": ("cancelled", ExitCode.INTERRUPTED),
    "TIMEOUT": ("timed_out", ExitCode.INTERRUPTED),
    "DEADLINE": ("timed_out", ExitCode.INTERRUPTED),
    "NODE_FAIL": ("node_lost", ExitCode.INTERRUPTED),
    "BOOT_FAIL": ("node_lost", ExitCode.INTERRUPTED),
    "PREEMPTED": ("preempted", ExitCode.INTERRUPTED),
    "OUT_OF_MEMORY": ("out_of_memory", ExitCode.FAILED),
    "FAILED": ("crashed", ExitCode.FAILED),
    "COMPLETED": ("crashed", ExitCode.FAILED),  # (ended without writing its result)
}
WAITING = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "SUSPENDED", "RESV_DEL_HOLD"}


@dataclass
class Outcome:
    status: str
    code: int
    error: str | None = None


@dataclass
class SlurmState:
    state: str  # squeue's %T: PENDING, RUNNING, CANCELLED, ...
    reason: str  # squeue's %r: why it pends (Resources, Priority, PartitionConfig, ...)


def slurm_states(job_ids: Sequence[str]) -> dict[str, SlurmState] | None:
    """job id (`123_0` for a task of an array) -> its state, for the jobs squeue still knows; None when squeue
    gave no answer (slurmctld busy or restarting: ask again later)."""
    arrays = sorted({j.split("_")[0] for j in job_ids})
    try:
        res = subprocess.run(
            ["squeue", "-h", "-r", "-t", "all", "-j", ",".join(arrays), "-o", "%i|%T|%r"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if res.returncode != 0:
        return {} if "Invalid job id" in res.stderr else None  # (every one of them forgotten)
    out = {}
    for line in res.stdout.splitlines():
        job_id, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        out[job_id] = SlurmState(state, reason)
    return out


def outcome_of(job_return: JobReturn) -> Outcome:
    """The outcome of a job that wrote its result: the run's exit code, or a job that did not start."""
    if job_return.status == JobStatus.COMPLETED:
        code = int(job_return._return_value or 0)
        return Outcome(sweep.status_of(code), code)
    from hermes_runner.commands.runner import one_line

    return Outcome(sweep.status_of(ExitCode.CONFIG), int(ExitCode.CONFIG), one_line(job_return._return_value))


class _Waiting:
    """The sweep's jobs until each has ended: outcomes as they end, pending reasons as they change."""

    def __init__(self, jobs: list[Any], overrides: Sequence[Sequence[str]], sweep_dir: Path, slurm: bool):
        from hermes_runner.commands.runner import global_groups

        groups = global_groups()
        self.jobs, self.overrides, self.sweep_dir, self.slurm = jobs, [list(o) for o in overrides], sweep_dir, slurm
        self.dirs = [sweep.job_dirname(o, groups) for o in self.overrides]
        self.returns: list[JobReturn | None] = [None] * len(jobs)
        self.reasons: dict[int, str] = {}
        self.gone: dict[int, int] = {}

    def wait(self) -> list[JobReturn]:
        """Until every job has ended; squeue is asked every second at first, less often as the sweep goes on
        (every 30 s after 10 minutes: a big cluster's controller is not to be pestered)."""
        left, started = set(range(len(self.jobs))), time.monotonic()
        while left:
            states = slurm_states([self.jobs[i].job_id for i in left]) if self.slurm else {}
            for i in sorted(left):
                if states is None and not self.jobs[i].paths.result_pickle.exists():
                    continue  # (no answer from SLURM this time)
                if (outcome := self._ended(i, (states or {}).get(self.jobs[i].job_id))) is not None:
                    self._record(i, outcome)
                    left.discard(i)
            if left:
                time.sleep(min(POLL_S[1], max(POLL_S[0], (time.monotonic() - started) / 20)))
        return [r for r in self.returns if r is not None]

    def _ended(self, i: int, state: SlurmState | None) -> Outcome | None:
        job = self.jobs[i]
        if job.paths.result_pickle.exists():
            return self._returned(job, state)
        if not self.slurm:
            if not job.done():
                return None
            return Outcome(
                "crashed", int(ExitCode.FAILED), f"ended without a result ({job.state}): see {job.paths.stderr}"
            )
        if state is None:
            self.gone[i] = self.gone.get(i, 0) + 1
            if self.gone[i] < GONE_POLLS:
                return None
            return Outcome("lost", int(ExitCode.INTERRUPTED), f"SLURM no longer knows job {job.job_id}")
        self.gone.pop(i, None)
        base = state.state.split()[0].rstrip("+")
        if base in WAITING:
            self._pending(i, state)
            return None
        if base not in SLURM_ENDINGS:
            return None  # RUNNING, COMPLETING, ...: the result file comes next
        if base == "COMPLETED" and job.paths.result_pickle.exists():
            return None
        status, code = SLURM_ENDINGS[base]
        return Outcome(status, int(code), f"SLURM job {job.job_id}: {state.state} (log: {job.paths.stderr})")

    def _returned(self, job: Any, state: SlurmState | None) -> Outcome | None:
        """The outcome of a job that wrote its result. A run stopped by a signal says `interrupted`: which signal
        is SLURM's to say (scancel: cancelled, the time limit: timed_out), once the job has ended."""
        try:
            outcome = outcome_of(job.results()[0])
        except Exception as exc:  # (the job's own error: submitit re-raises it here)
            text = str(exc).strip()
            if "not requeued because" in text:  # (submitit: timed out max_num_timeout times)
                return Outcome("timed_out", int(ExitCode.INTERRUPTED), text.splitlines()[-1][:500])
            return Outcome("crashed", int(ExitCode.FAILED), text.splitlines()[-1][:500])
        if not self.slurm or outcome.code != ExitCode.INTERRUPTED or state is None:
            return outcome
        base = state.state.split()[0].rstrip("+")
        if base in SLURM_ENDINGS and base != "COMPLETED":
            return Outcome(SLURM_ENDINGS[base][0], outcome.code, f"SLURM job {job.job_id}: {state.state}")
        return None if base in ("RUNNING", "COMPLETING") else outcome

    def _pending(self, i: int, state: SlurmState) -> None:
        if self.reasons.get(i) != state.reason and state.reason != "None":  # (None: not yet looked at)
            self.reasons[i] = state.reason
            log.warning("job %s (%s) is %s: %s", self.jobs[i].job_id, self.dirs[i], state.state.lower(), state.reason)

    def _record(self, i: int, outcome: Outcome) -> None:
        from hermes_runner.commands import runner

        sweep.record_job(self.sweep_dir, self.dirs[i], self.overrides[i], outcome.status, outcome.code, outcome.error)
        runner.SWEEP_CODES.append(outcome.code)
        if outcome.status not in (sweep.status_of(c) for c in ExitCode):  # (SLURM ended it: the run could not say)
            log.warning(
                "job %s (%s): %s, exit code %d", self.jobs[i].job_id, self.dirs[i], outcome.status, outcome.code
            )
        if outcome.status == "config":  # Hydra's sweeper raises the job's error (the sweep exits 2 with it)
            self.returns[i] = self.jobs[i].results()[0]
        else:
            self.returns[i] = JobReturn(
                overrides=self.overrides[i], _return_value=outcome.code, status=JobStatus.COMPLETED
            )


def _executor(launcher: submitit_launcher.BaseSubmititLauncher) -> Any:
    """submitit's executor with the launcher's parameters, as hydra-submitit-launcher builds it."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from omegaconf import OmegaConf

    kind, params = launcher._EXECUTOR, launcher.params
    init = {"folder": params["submitit_folder"]}
    if "max_num_timeout" in params:
        init[f"{kind}_max_num_timeout"] = params["max_num_timeout"]
    executor = submitit.AutoExecutor(cluster=kind, **init)
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(
        **{
            k if k in base else f"{kind}_{k}": v
            for k, v in params.items()
            if k not in ("submitit_folder", "max_num_timeout")
        }
    )
    return executor


class _Launcher(submitit_launcher.BaseSubmititLauncher):
    def __call__(self, *args: Any, **kwargs: Any) -> JobReturn:
        """The job, on its node. SLURM's warning before the time limit (SIGUSR2, signal_delay_s ahead) stops the
        run as SIGTERM does (it saves its progress and returns), then submitit requeues the job (it resumes; up
        to max_num_timeout times) or ends it as timed out. (submitit's handler alone exits wherever the run is.)"""
        requeue = signal.getsignal(signal.SIGUSR2)
        warned: list[int] = []
        if callable(requeue):

            def on_warning(signum: int, frame: object) -> None:
                warned.append(signum)
                os.kill(os.getpid(), signal.SIGTERM)

            signal.signal(signal.SIGUSR2, on_warning)
        job_return = super().__call__(*args, **kwargs)
        if warned:
            requeue(warned[0], None)  # (exits the job when requeued; raises when timed out too many times)
        return job_return

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from hydra.core.singleton import Singleton
        from hydra.core.utils import filter_overrides

        assert self.config is not None and job_overrides
        self.check_fits()
        executor = _executor(self)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info("Submitit '%s' sweep output dir : %s", self._EXECUTOR, sweep_dir)
        params = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
            params.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state()))
        jobs = executor.map_array(self, *zip(*params, strict=True))
        return _Waiting(jobs, job_overrides, sweep_dir, slurm=self._EXECUTOR == "slurm").wait()

    def check_fits(self) -> None:
        """Refuse, before submitting, a job that no node could run (the local launcher runs anything)."""


class LocalLauncher(_Launcher):
    _EXECUTOR = "local"


class SlurmLauncher(_Launcher):
    _EXECUTOR = "slurm"

    def check_fits(self) -> None:
        """A job asking more CPUs or memory than any node of its partition has pends forever (PartitionConfig):
        refused here, naming what the partition offers."""
        p = self.params
        partition = p.get("partition")
        cmd = ["sinfo", "-h", "-o", "%P|%c|%m|%l"] + (["-p", str(partition)] if partition else [])
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConfigError(f"hydra/launcher=slurm: cannot ask SLURM about its partitions ({exc})") from None
        rows = [ln.split("|") for ln in res.stdout.splitlines() if ln.count("|") == 3]
        if not partition:
            rows = [r for r in rows if r[0].endswith("*")] or rows
        if res.returncode != 0 or not rows:
            what = res.stderr.strip() or "no such partition"
            raise ConfigError(f"hydra.launcher.partition={partition}: sinfo says: {what}")
        name = rows[0][0].rstrip("*")
        cpus = max(_number(r[1]) for r in rows)
        mem_mb = max(_number(r[2]) for r in rows)
        want_cpus = int(p.get("cpus_per_task") or 1) * int(p.get("tasks_per_node") or 1)
        want_mb = int(float(p.get("mem_gb") or 0) * 1024)
        if want_cpus > cpus or want_mb > mem_mb:
            raise ConfigError(
                f"hydra/launcher=slurm: a job asks cpus_per_task={p.get('cpus_per_task')}, mem_gb={p.get('mem_gb')}"
                f" but the nodes of partition {name} have at most {cpus} CPUs and {mem_mb / 1024:.1f} GB"
                f" (time limit {rows[0][3]}): SLURM would keep the jobs pending forever (PartitionConfig); set"
                " hydra.launcher.cpus_per_task / hydra.launcher.mem_gb within that"
            )


def _number(text: str) -> int:
    """sinfo's `2`, `2+` or `24000+` as a number (the largest node's is at least that)."""
    return int(text.rstrip("+").split("-")[-1] or 0)
