"""A run's identity on disk: `run.json` (the config that defines its data, checked on every resume) and
`invocations.jsonl` (every invocation's overrides and full config)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path

from hermes_runner import __version__
from hermes_runner.config import DATA_KEYS, select  # noqa: F401  (DATA_KEYS re-exported)
from hermes_runner.errors import ConfigError
from hermes_runner.rundir.layout import HASHES, INVOCATIONS, MANIFEST  # noqa: F401  (re-exported)
from hermes_runner.rundir.store import atomic_write, atomic_write_json
from hermes_runner.util.redact import Redactor

log = logging.getLogger(__name__)


def data_config(conf: dict, dropped: Collection[str]) -> dict:
    """The options that define the run's data (of the config as plain values), with the toolsets dropped for
    want of a backend (services.check_toolsets)."""
    out = {key: select(conf, key) for key in DATA_KEYS}
    # Toolsets dropped for want of a backend change what prompts are offered.
    out["toolsets_unavailable"] = sorted(dropped) or None
    return out


def _diff(old: dict, new: dict) -> list[str]:
    """The changed data options; a key an older run.json does not record is not a change."""
    return [f"{k}: {json.dumps(old.get(k))} -> {json.dumps(new.get(k))}" for k in new if k in old and old[k] != new[k]]


def open_run(run_dir: Path, current: dict, run_name: str, resume: bool = True, force_resume: bool = False) -> int:
    """Check resume rules of the run's `current` data config (`data_config`) against the manifest; return the
    invocation number. Nothing is written: `write_manifest` does that once the run has started."""
    manifest = run_dir / MANIFEST
    if manifest.exists():
        if not resume:
            raise ConfigError(
                f"run directory {run_dir} already holds run {run_name!r} and resume=false. "
                f"To start fresh, delete {run_dir} or choose another run_name; to continue it, drop resume=false."
            )
        old = json.loads(manifest.read_text())
        changes = _diff(old.get("data_config", {}), current)
        if changes and not force_resume:
            raise ConfigError(
                "the configuration that defines this run's data changed since it began:\n  "
                + "\n  ".join(changes)
                + "\nUse another run_name for a new run, or force_resume=true to continue with the new settings."
            )
        if changes:
            log.warning("force_resume: continuing with changed settings: %s", "; ".join(changes))
    inv_path = run_dir / INVOCATIONS
    n = sum(1 for _ in inv_path.open()) if inv_path.exists() else 0
    return n


def write_manifest(run_dir: Path, current: dict, run_name: str, tool_toolsets: dict[str, str] | None = None) -> None:
    """Write `run.json` (the guard of the run's `current` data config) unless it exists: call it once the run
    starts. `tool_toolsets`: tool -> its toolset, for readers that know no tools (the report)."""
    manifest = run_dir / MANIFEST
    if not manifest.exists():
        body = {"run_name": run_name, "created": now(), "data_config": current}
        if tool_toolsets is not None:
            body["tool_toolsets"] = dict(sorted(tool_toolsets.items()))
        atomic_write_json(manifest, body)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def start_invocation(
    run_dir: Path,
    n: int,
    config: dict,
    overrides: list[str],
    started: float,
    redact: Redactor | None = None,
    scorer_code: dict[str, str] | None = None,
) -> None:
    """Append this invocation's record (`ended: null` until `end_invocation`) with its whole `config` (as plain
    values), fsynced: a killed invocation stays recorded. `scorer_code`: scorer -> the sha256 of its own code
    (python scorers), the provenance of their scores."""
    redact = redact or Redactor()
    entry = {
        "invocation": n,
        "version": __version__,  # hermes-runner's: the provenance of what this invocation records
        "started": _stamp(started),
        "ended": None,
        "duration_s": None,
        "pid": os.getpid(),
        "argv": redact(sys.argv[1:]),
        "overrides": redact(list(overrides)),
        "config": redact(config),
    }
    if scorer_code:
        entry["scorer_code"] = dict(sorted(scorer_code.items()))
    fd = os.open(run_dir / INVOCATIONS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def end_invocation(run_dir: Path, n: int, started: float, ended: float) -> None:
    """Set the end of invocation `n` in its record (the file is rewritten atomically)."""
    path = run_dir / INVOCATIONS
    lines = path.read_bytes().splitlines(keepends=True) if path.exists() else []
    for i in range(len(lines) - 1, -1, -1):
        try:
            entry = json.loads(lines[i])
        except ValueError:
            continue
        if entry.get("invocation") == n and entry.get("pid") == os.getpid():
            entry.update(ended=_stamp(ended), duration_s=round(ended - started, 3))
            lines[i] = (json.dumps(entry) + "\n").encode()
            atomic_write(path, b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines))
            return


def record_hash(run_dir: Path, key: str, value: object) -> None:
    """Append `key` (a hash) and the value it stands for to the run's hash table (HASHES), fsynced."""
    fd = os.open(run_dir / HASHES, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps({"hash": key, "value": value}, ensure_ascii=False) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def past_durations(run_dir: Path) -> float:
    """Seconds spent by the invocations recorded so far."""
    total = 0.0
    path = run_dir / INVOCATIONS
    if path.exists():
        for line in path.open():
            with contextlib.suppress(ValueError):
                total += json.loads(line).get("duration_s") or 0.0
    return total
