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
from hermes_runner.rundir.layout import FEATURES_FILE, INVOCATIONS, MANIFEST, MERGED, STATISTICS, TRAJECTORIES
from hermes_runner.rundir.stats import RunStats
from hermes_runner.rundir.store import FAILURES, LEDGER, TERMINAL, TIMELINE, TOKENS, LedgerReader, Ref, iter_lines
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
    ref_dirs: dict[str, Path] = field(default_factory=dict)  # key -> the dir its ref points into (merged runs)
    merged_from: list[Path] = field(default_factory=list)  # the shard dirs of a merged run dir

    @classmethod
    def load(cls, run_dir: Path | str) -> RunData:
        d = Path(run_dir)
        if not is_run_dir(d):
            raise NotARunDir(f"{d} is not a run directory (no {LEDGER}, {MANIFEST} or {MERGED})")
        if (d / MERGED).is_file() and not (d / LEDGER).is_file():
            return _load_merged(d)
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
                    "scorers_hash": rec.get("scorers_hash"),  # the provenance of the new scores
                }

        store = LedgerReader(d)
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
        handles: dict[Path, int] = {}
        try:
            for key in keys:
                ref = self.refs.get(key)
                if ref is None:
                    continue
                path = self.ref_dirs.get(key, self.dir) / ref.file
                fd = handles.get(path)
                if fd is None:
                    fd = handles[path] = os.open(path, os.O_RDONLY)
                try:
                    entry = json.loads(os.pread(fd, ref.length, ref.offset))
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
        for d in self.merged_from or [self.dir]:
            for rec in read_jsonl(d / FAILURES):
                if rec.get("key") in failed:
                    out[rec["key"]] = rec
        return out

    def timelines(self, keys: Iterable[str] | None = None) -> dict[str, list[dict]]:
        """The timed model and tool calls of each prompt's final attempt (timeline.jsonl; runs of older
        versions have none)."""
        return {k: rec["calls"] for k, rec in self._attempt_lines(TIMELINE, "calls", keys).items()}

    def tokens(self, keys: Iterable[str] | None = None) -> dict[str, dict]:
        """The token sidecar record ({key, inv, turns, drift}) of each prompt's final attempt (output.tokens)."""
        return self._attempt_lines(TOKENS, "turns", keys)

    def _attempt_lines(self, name: str, field: str, keys: Iterable[str] | None) -> dict[str, dict]:
        """The line of a per-attempt side log for each prompt's final attempt: the one of the final record's
        invocation, else the last one (a line whose `field` is not a list is skipped)."""
        wanted = set(self.final if keys is None else keys)
        out: dict[str, dict] = {}
        matched: set[str] = set()  # keys whose line of the final record's invocation was read
        for d in self.merged_from or [self.dir]:
            for rec in read_jsonl(d / name):
                key = rec.get("key")
                if key not in wanted or key in matched or not isinstance(rec.get(field), list):
                    continue
                out[key] = rec
                if rec.get("inv") == self.final[key].get("inv"):
                    matched.add(key)
        return out

    def features(self) -> dict | None:
        """The run's `datasets` features (dataset_features.json), when it wrote them."""
        for d in [self.dir, *self.merged_from]:
            if (spec := read_json(d / FEATURES_FILE)) is not None:
                return spec
        return None


def is_run_dir(path: Path) -> bool:
    return (path / LEDGER).is_file() or (path / MANIFEST).is_file() or (path / MERGED).is_file()


# -- merged run dirs (python -m hermes_runner.merge) ---------------------------------------------


def _shard_dirs(d: Path, merged: dict) -> list[Path] | None:
    """The shard dirs a merge read, when every one is still a run dir (by its absolute path, or as given,
    from the merged dir's parent or the working dir); else None."""
    found = []
    for shard in merged.get("shards") or []:
        candidates = [Path(shard.get("path") or shard.get("dir", ""))]
        if not candidates[0].is_absolute():
            candidates += [d.parent / candidates[0].name, d.parent / candidates[0]]
        hit = next((c for c in candidates if (c / LEDGER).is_file()), None)
        if hit is None:
            return None
        found.append(hit)
    return found or None


def _load_merged(d: Path) -> RunData:
    """A merged dir: the shards' records when the shards are still there, else its own trajectories
    (kept prompts only; the other counts are in its statistics.json)."""
    merged = read_json(d / MERGED) or {}
    statistics = read_json(d / STATISTICS)
    manifest = {"run_name": d.name, "data_config": merged.get("data_config") or {}}
    shards = _shard_dirs(d, merged)
    if shards:
        runs = [RunData.load(s) for s in shards]
        final = {k: r for run in runs for k, r in run.final.items()}
        order = sorted(final, key=lambda k: (final[k].get("index", 0), k))
        stats = RunStats()
        for run in runs:
            stats.merge(run.stats)
        return RunData(
            dir=d,
            name=runs[0].name,
            manifest={**runs[0].manifest, **manifest, "run_name": runs[0].name},
            statistics=statistics,
            invocations=[inv for run in runs for inv in run.invocations],
            stats=stats,
            final={k: final[k] for k in order},
            refs={k: ref for run in runs for k, ref in run.refs.items()},
            ref_dirs={k: run.dir for run in runs for k in run.refs},
            merged_from=shards,
        )
    stats, final, refs = RunStats(), {}, {}
    offset = 0
    path = d / TRAJECTORIES
    for line in iter_lines(path) if path.exists() else ():
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if isinstance(entry, dict):
            rec = _record_of(entry)
            final[rec["key"]] = rec
            refs[rec["key"]] = Ref("ok", TRAJECTORIES, offset, len(line), rec["index"], rec["batch"])
            stats.add(rec)
        offset += len(line)
    if statistics:
        stats.discarded.update(statistics.get("discarded_by_reason") or {})
        stats.failed.update(statistics.get("failed_by_error") or {})
    return RunData(d, d.name, manifest, statistics, [], stats, final, refs)


def _record_of(entry: dict) -> dict:
    """A ledger-like record of a kept trajectory entry (for a merged dir without its shards)."""
    meta = entry.get("metadata") or {}
    stats = entry.get("tool_stats") or {}
    index = int(entry.get("prompt_index", -1))
    return {
        "key": str(meta.get("prompt_key") or index),
        "index": index,
        "status": "ok",
        "batch": int(meta.get("batch_num", -1)),
        "completed": bool(entry.get("completed")),
        "partial": bool(entry.get("partial")),
        "stop": entry.get("stop_reason") or "",
        "api_calls": int(entry.get("api_calls") or 0),
        "usage": entry.get("usage") or {},
        "toolsets": list(entry.get("toolsets_used") or []),
        "turns": sum(1 for t in entry.get("conversations") or [] if t.get("from") == "gpt"),
        "tools": {n: [int(s.get("count", 0)), int(s.get("failure", 0))] for n, s in stats.items() if s.get("count")},
    }


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
        if (LEDGER in filenames or MANIFEST in filenames or MERGED in filenames) and depth > 0:
            found.append(Path(dirpath))
            dirnames[:] = []
        elif depth >= max_depth:
            dirnames[:] = []
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    if not found:
        raise NotARunDir(f"{root} holds no run: no {LEDGER}, {MANIFEST} or {MERGED} in it or in its subdirectories")
    return sorted(found)


def job_labels(root: Path, dirs: list[Path]) -> list[str]:
    """Short names of a sweep's jobs: their override dirnames without the overrides all jobs share."""
    parts = [str(d.relative_to(root)).split(",") for d in dirs]
    common = set(parts[0]).intersection(*parts[1:]) if len(parts) > 1 else set()
    labels = [",".join(p for p in ps if p not in common) or ",".join(ps) for ps in parts]
    return labels if len(set(labels)) == len(labels) else [str(d.relative_to(root)) for d in dirs]
