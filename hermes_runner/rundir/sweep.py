"""A sweep's directory: one subdir per job, named by the job's overrides that define the data (readable, long
values shortened in the middle), and `jobs.jsonl`, the index of its jobs (one line per job dir)."""

from __future__ import annotations

import fcntl
import hashlib
import json
from collections.abc import Collection, Iterable
from datetime import UTC, datetime
from pathlib import Path

from hermes_runner.config import DATA_KEYS
from hermes_runner.errors import ConfigError, ExitCode
from hermes_runner.rundir.layout import JOBS_INDEX
from hermes_runner.rundir.store import atomic_write

VALUE_MAX = 48  # characters of one value in a dir name; a longer one keeps its head and tail
HEAD = 12  # of a shortened value: its head, `...`, its tail and a short hash of the whole value
NAME_MAX = 240  # characters of a whole dir name (file systems take 255 bytes)


def override_key(override: str) -> str:
    """`+model.name=x` -> `model.name` (the key without its +, ++ or ~)."""
    return override.split("=", 1)[0].lstrip("+~")


def defines_data(key: str, global_groups: Collection[str] = ("experiment",)) -> bool:
    """Whether an override of `key` changes a job's data: a key of DATA_KEYS, a config group or section holding
    one (`model=...`, `output.*`), a key inside one (`filters.require_reasoning`), or a group that may set any
    key (`+experiment=...`). Not: max_samples, num_workers, limits.max_cost_usd, executor, hydra.*, ..."""
    if key == "hydra" or key.startswith("hydra.") or key.startswith("hydra/"):
        return False
    return key in global_groups or any(
        key == k or key.startswith(k + ".") or k.startswith(key + ".") for k in DATA_KEYS
    )


def shorten(value: str, limit: int = VALUE_MAX) -> str:
    """A value fit for a dir name: no path separators; a long one as head...tail-hash (the tail of a model
    name or a path is what tells two apart)."""
    value = value.replace("/", "_").replace("\\", "_")
    if len(value) <= limit:
        return value
    digest = hashlib.sha1(value.encode()).hexdigest()[:6]
    tail = limit - HEAD - 3 - 1 - len(digest)
    return f"{value[:HEAD]}...{value[-tail:]}-{digest}"


def job_dirname(overrides: Iterable[str], global_groups: Collection[str] = ("experiment",)) -> str:
    """The dir name of a sweep job: its data-defining overrides, sorted, as key=value joined by commas."""
    parts = []
    for override in sorted(overrides):
        key, _, value = override.partition("=")
        if defines_data(override_key(override), global_groups):
            parts.append(f"{key.replace('/', '_')}={shorten(value)}")
    name = ",".join(parts) or "default"
    if len(name) > NAME_MAX:  # many long overrides: still unique, the start still readable
        name = f"{name[: NAME_MAX - 17]}-{hashlib.sha1(name.encode()).hexdigest()[:16]}"
    return name


def check_sweep(swept: Iterable[str], global_groups: Collection[str] = ("experiment",)) -> None:
    """Refuse a sweep over keys that do not define the data: its jobs would share one directory."""
    shared = sorted({k for k in swept if not defines_data(k, global_groups)})
    if shared:
        raise ConfigError(
            f"the sweep varies {', '.join(shared)}, which do(es) not define a job's data (config.DATA_KEYS), so "
            "its jobs would share one directory: sweep over data options or config groups, or run each value "
            "with a run_name of its own"
        )


def status_of(code: int) -> str:
    """The status of a job that ended with exit code `code`: its ExitCode's name (`done`, `endpoint_down`, ...)."""
    return ExitCode(code).name.lower() if code in ExitCode._value2member_map_ else str(code)


def worst(codes: Iterable[int]) -> int:
    """A sweep's exit code: the worst of its jobs' (the highest; 0 when every job is done)."""
    return max(codes, default=int(ExitCode.DONE))


def record_job(
    sweep_dir: Path, job_dir: str, overrides: list[str], status: str, exit_code: int | None, error: str | None = None
) -> None:
    """Write the job's line of `jobs.jsonl` (replacing its earlier line), under a lock: jobs end in parallel."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    index = sweep_dir / JOBS_INDEX
    line = {
        "dir": job_dir,
        "label": job_dir,
        "overrides": overrides,
        "status": status,
        "exit_code": exit_code,
        "error": error,
        "ended_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with (sweep_dir / f".{JOBS_INDEX}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows = read_jobs(sweep_dir)
        rows[job_dir] = line
        atomic_write(index, b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rows.values()))


def read_jobs(sweep_dir: Path) -> dict[str, dict]:
    """The lines of `jobs.jsonl` by job dir (empty if there is none yet)."""
    path = sweep_dir / JOBS_INDEX
    if not path.exists():
        return {}
    rows = (json.loads(ln) for ln in path.read_text().splitlines() if ln.strip())
    return {r["dir"]: r for r in rows}
