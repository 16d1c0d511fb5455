"""Read-only view of a run directory (finished or still running): the ledger is the source of truth."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from hermes_runner.errors import NotARunDir
from hermes_runner.rundir.layout import INVOCATIONS, MANIFEST, STATISTICS
from hermes_runner.rundir.stats import RunStats
from hermes_runner.rundir.store import FAILURES, LEDGER, TERMINAL, Ref, RunStore, iter_lines
from hermes_runner.usage import Usage

STATUSES = ("completed", "partial", "incomplete", "discarded", "failed")


def status_of(rec: dict) -> str:
    """The viewer's status of a final ledger record: kept ones split by how they ended."""
    if rec["status"] == "discarded":
        return "discarded"
    if rec["status"] == "failed":
        return "failed"
    if rec.get("completed"):
        return "completed"
    return "partial" if rec.get("partial") else "incomplete"


def read_json(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def read_jsonl(path: Path) -> Iterator[dict]:
    """Complete, readable lines of a JSONL file that may still be written."""
    if not path.exists():
        return
    for raw in iter_lines(path):
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


@dataclass
class RunData:
    """Everything a report or export needs from one run directory."""

    dir: Path
    name: str
    manifest: dict
    statistics: dict | None  # statistics.json when it is up to date with the ledger
    invocations: list[dict]
    stats: RunStats  # aggregated from the ledger (complete even while the run goes on)
    final: dict[str, dict] = field(default_factory=dict)  # key -> final record (terminal, or latest failure)
    refs: dict[str, Ref] = field(default_factory=dict)
    live: bool = False  # the ledger is newer than statistics.json: running, or stopped before finalizing

    @classmethod
    def load(cls, run_dir: Path | str) -> RunData:
        d = Path(run_dir)
        if not is_run_dir(d):
            raise NotARunDir(f"{d} is not a run directory (no {LEDGER} or {MANIFEST})")
        stats = RunStats()
        terminal: dict[str, dict] = {}

        def on_record(rec: dict) -> None:
            stats.add(rec)
            if rec["status"] in TERMINAL:
                terminal[rec["key"]] = rec
            elif rec["status"] == "rescored" and rec["key"] in terminal:  # the new scores, the same disposition
                terminal[rec["key"]] = {
                    **terminal[rec["key"]],
                    "reward": rec.get("reward"),
                    "scores": rec.get("scores"),
                }

        store = RunStore(d)
        state = store.load(on_record, repair=False)
        calls = store.load_calls(state.attempts)  # usage.jsonl: the calls of prompts cut off before their record
        stats.usage.add(Usage.from_dict(calls.unrecorded_usage))
        stats.api_calls += calls.unrecorded_api_calls
        stats.retries += calls.unrecorded_errors
        stats.failed = Counter(r.get("error_type", "Error") for r in state.failed.values())
        final = {**state.failed, **terminal}
        order = sorted(final, key=lambda k: (final[k].get("index", 0), k))
        stats_path = d / STATISTICS
        statistics = read_json(stats_path)
        ledger = d / LEDGER
        live = statistics is None or (ledger.exists() and stats_path.stat().st_mtime < ledger.stat().st_mtime)
        manifest = read_json(d / MANIFEST) or {}
        return cls(
            dir=d,
            name=manifest.get("run_name") or d.name,
            manifest=manifest,
            statistics=None if live else statistics,
            invocations=list(read_jsonl(d / INVOCATIONS)),
            stats=stats,
            final={k: final[k] for k in order},
            refs=state.terminal,
            live=live,
        )

    # -- derived facts ----------------------------------------------------------------

    def total_prompts(self) -> int | None:
        """Prompts in scope, when a finished invocation recorded it."""
        return self.statistics.get("total_prompts") if self.statistics else None

    def target_toolsets(self) -> dict[str, float]:
        dist = (self.manifest.get("data_config") or {}).get("distribution") or {}
        return dict(dist.get("toolsets") or {}) if isinstance(dist, dict) else {}

    def tool_toolsets(self) -> dict[str, str] | None:
        """Tool -> toolset, as run.json records it (None in run dirs written before it did)."""
        owner = self.manifest.get("tool_toolsets")
        return dict(owner) if isinstance(owner, dict) else None

    def config_value(self, key: str) -> object:
        return (self.manifest.get("data_config") or {}).get(key)

    def duration_s(self) -> float:
        """Wall time of the finished invocations, plus the span of a running one."""
        done = sum(inv.get("duration_s") or 0.0 for inv in self.invocations)
        if self.statistics:
            return float(self.statistics.get("duration_seconds", done))
        finished = {inv.get("invocation") for inv in self.invocations if inv.get("ended")}
        first_open = len(finished)  # (records of a runner that wrote its invocation only at the end)
        running = [
            r["ts"]
            for r in self.final.values()
            if r.get("inv", -1) not in finished and r.get("inv", -1) >= first_open and r.get("ts")
        ]
        if running:
            span = datetime.fromisoformat(max(running)) - datetime.fromisoformat(min(running))
            done += span.total_seconds()
        return done

    def by_status(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {s: [] for s in STATUSES}
        for key, rec in self.final.items():
            out[status_of(rec)].append(key)
        return out

    # -- trajectories -------------------------------------------------------------------

    def entries(self, keys: Iterable[str]) -> Iterator[tuple[dict, dict]]:
        """(final record, trajectory entry) of the given kept or discarded prompts, read by ledger offsets."""
        store = RunStore(self.dir)
        handles: dict[str, int] = {}
        try:
            for key in keys:
                ref = self.refs.get(key)
                if ref is None:
                    continue
                try:
                    entry = json.loads(store.read_entry(ref, handles))
                except ValueError:
                    continue
                yield self.final[key], entry
        finally:
            for fd in handles.values():
                os.close(fd)

    def failures(self) -> dict[str, dict]:
        """The latest failure detail (error, traceback, prompt) of every still-failed prompt."""
        failed = {k for k, r in self.final.items() if r["status"] == "failed"}
        out: dict[str, dict] = {}
        for rec in read_jsonl(self.dir / FAILURES):
            if rec.get("key") in failed:
                out[rec["key"]] = rec
        return out


def is_run_dir(path: Path) -> bool:
    return (path / LEDGER).is_file() or (path / MANIFEST).is_file()


def find_runs(path: Path | str, max_depth: int = 16) -> list[Path]:
    """The run directories at or under `path` (a run, or a sweep whose jobs are subdirectories)."""
    root = Path(path)
    if not root.is_dir():
        raise NotARunDir(f"{root} is not a directory")
    if is_run_dir(root):
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        depth = len(Path(dirpath).relative_to(root).parts)
        if (LEDGER in filenames or MANIFEST in filenames) and depth > 0:
            found.append(Path(dirpath))
            dirnames[:] = []
        elif depth >= max_depth:
            dirnames[:] = []
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    if not found:
        raise NotARunDir(f"{root} holds no run: no {LEDGER} or {MANIFEST} in it or in its subdirectories")
    return sorted(found)


def job_labels(root: Path, dirs: list[Path]) -> list[str]:
    """Short names of a sweep's jobs: their override dirnames without the overrides all jobs share."""
    parts = [str(d.relative_to(root)).split(",") for d in dirs]
    common = set(parts[0]).intersection(*parts[1:]) if len(parts) > 1 else set()
    labels = [",".join(p for p in ps if p not in common) or ",".join(ps) for ps in parts]
    return labels if len(set(labels)) == len(labels) else [str(d.relative_to(root)) for d in dirs]
