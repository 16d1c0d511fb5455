"""Combine the run dirs of a sharded run into one trajectories.jsonl and one statistics.json.

    python -m hermes_runner.merge OUT_DIR SHARD_DIR [SHARD_DIR ...] [--partial]

Each shard is a finished run of the same config with its own `shard.index` (same
`shard.count`). Shards from a different config, or that overlap, are refused; so is an
incomplete set unless `--partial`. The shard dirs are only read.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from hermes_runner.errors import ConfigError
from hermes_runner.rundir.layout import MERGED, STATISTICS, TRAJECTORIES
from hermes_runner.rundir.manifest import MANIFEST
from hermes_runner.rundir.stats import ScoreTally
from hermes_runner.rundir.store import LEDGER, LedgerReader, atomic_write, atomic_write_json

SHARD_KEYS = ("shard.index", "shard.count")
_INDEX = re.compile(rb'^\{"prompt_index": (-?\d+)')


@dataclass
class Shard:
    dir: Path
    data_config: dict  # without the shard keys
    index: int
    count: int
    stats: dict


def load_shard(path: Path) -> Shard:
    if not (path / MANIFEST).is_file():
        raise ConfigError(f"{path} is not a run directory (no {MANIFEST})")
    for name in (STATISTICS, TRAJECTORIES):
        if not (path / name).is_file():
            raise ConfigError(f"{path} has no {name}: run it again (same command) to finish it, then merge")
    config = json.loads((path / MANIFEST).read_text())["data_config"]
    index, count = config.get("shard.index", 0), config.get("shard.count", 1)
    data = {k: v for k, v in config.items() if k not in SHARD_KEYS}
    return Shard(path, data, index, count, json.loads((path / STATISTICS).read_text()))


def check(shards: list[Shard], partial: bool = False) -> None:
    """Refuse shards of different configs, overlapping shards and (unless partial) a missing one."""
    first = shards[0]
    for s in shards[1:]:
        a, b = first.data_config, s.data_config
        changes = [f"{k}: {json.dumps(a.get(k))} -> {json.dumps(b.get(k))}" for k in {**a, **b} if a.get(k) != b.get(k)]
        if changes:
            raise ConfigError(f"{s.dir} was run with another config than {first.dir}:\n  " + "\n  ".join(changes))
        if s.count != first.count:
            raise ConfigError(f"{s.dir} is shard {s.index} of {s.count}, but {first.dir} is of {first.count}")
    seen: dict[int, Path] = {}
    for s in shards:
        if s.index in seen:
            raise ConfigError(f"{s.dir} and {seen[s.index]} are both shard {s.index}: they overlap")
        seen[s.index] = s.dir
    missing = sorted(set(range(first.count)) - set(seen))
    if missing and not partial:
        raise ConfigError(
            f"shards {missing} of {first.count} are missing (pass --partial to merge only the ones given)"
        )


def _entries(shard: Shard) -> Iterator[tuple[int, bytes]]:
    """(prompt_index, line) of a shard's trajectories, checking order and count."""
    last, n = None, 0
    with (shard.dir / TRAJECTORIES).open("rb") as fp:
        for line in fp:
            if not line.strip():
                continue
            m = _INDEX.match(line)
            index = int(m.group(1)) if m else json.loads(line)["prompt_index"]
            if index % shard.count != shard.index:
                raise ConfigError(f"{shard.dir}: prompt {index} does not belong to shard {shard.index}/{shard.count}")
            if last is not None and index < last:  # (the samples of a row share its index)
                raise ConfigError(f"{shard.dir}/trajectories.jsonl is not ordered by prompt_index (edited?)")
            last, n = index, n + 1
            yield index, line if line.endswith(b"\n") else line + b"\n"
    best_of_k = (shard.data_config.get("filters") or {}).get("best_of_k")  # one sample per row of the kept ones
    if n != shard.stats["prompts"]["ok"] and not best_of_k:
        raise ConfigError(
            f"{shard.dir}: trajectories.jsonl has {n} entries but statistics.json counts "
            f"{shard.stats['prompts']['ok']} (out of date: run it again to finalize)"
        )


def merge_trajectories(shards: list[Shard], out: Path) -> int:
    """Write all shards' trajectories ordered by prompt_index; return how many."""
    count = 0

    def lines() -> Iterator[bytes]:
        nonlocal count
        for _, line in heapq.merge(*(_entries(s) for s in shards), key=lambda e: e[0]):
            count += 1
            yield line

    atomic_write(out, lines())
    return count


def _combine(values: list):
    """Sum numbers and dicts of numbers key by key; keep equal values; list differing ones."""
    if all(isinstance(v, dict) for v in values):
        keys = list(dict.fromkeys(k for v in values for k in v))
        return {k: _combine([v[k] for v in values if k in v]) for k in keys}
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return round(sum(values), 6) if any(isinstance(v, float) for v in values) else sum(values)
    return values[0] if all(v == values[0] for v in values) else values


def _rate(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def merge_statistics(shards: list[Shard]) -> dict:
    """One statistics.json for the whole run: counts summed, rates recomputed."""
    stats = _combine([s.stats for s in shards])
    stats["completed_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    stats["duration_seconds"] = max(s.stats.get("duration_seconds", 0.0) for s in shards)  # shards run side by side
    stats["prompts"]["rejected_lines"] = max(s.stats["prompts"].get("rejected_lines", 0) for s in shards)
    for t in stats.get("tool_statistics", {}).values():
        t["success_rate"], t["failure_rate"] = _rate(t["success"], t["count"]), _rate(t["failure"], t["count"])
    for key in ("reasoning_statistics", "reasoning_statistics_kept"):
        r = stats.get(key)
        if r:
            r["coverage_percent"] = _rate(r["turns_with_reasoning"], r["total_assistant_turns"])
    stats["shards"] = [
        {"dir": str(s.dir), "index": s.index, "count": s.count, "prompts": s.stats["prompts"]} for s in shards
    ]
    _merge_scores(stats, shards)
    return stats


def _merge_scores(stats: dict, shards: list[Shard]) -> None:
    """Estimates do not add up: `scores` and `results` are computed again over all shards' ledger records."""
    k = shards[0].stats.get("samples_per_prompt", 1)
    stats["samples_per_prompt"] = k
    stats.pop("scores", None)
    stats.pop("results", None)
    tally = ScoreTally()
    for shard in shards:
        LedgerReader(shard.dir).load(on_record=lambda r: r["status"] != "failed" and tally.add(r), repair=False)
    model = shards[0].data_config.get("model.name") or ""
    if (scores := tally.summary(k, model)) is not None:
        stats["scores"], stats["results"] = scores, tally.results(k, model)


def merge(out_dir: Path, shard_dirs: list[Path], partial: bool = False) -> dict:
    """Check the shards and write OUT_DIR/{trajectories.jsonl, statistics.json, merged.json}."""
    if not shard_dirs:
        raise ConfigError("give at least one shard directory")
    out_dir = Path(out_dir)
    resolved = {Path(d).resolve() for d in shard_dirs}
    if out_dir.resolve() in resolved:
        raise ConfigError(f"{out_dir} is one of the shards: write the merge to another directory")
    if (out_dir / MANIFEST).exists() or (out_dir / LEDGER).exists():
        raise ConfigError(f"{out_dir} holds a run: write the merge to another directory")
    if len(resolved) != len(shard_dirs):
        raise ConfigError("the same shard directory is given twice")
    shards = sorted((load_shard(Path(d)) for d in shard_dirs), key=lambda s: s.index)
    check(shards, partial)
    out_dir.mkdir(parents=True, exist_ok=True)
    n = merge_trajectories(shards, out_dir / TRAJECTORIES)
    stats = merge_statistics(shards)
    atomic_write_json(out_dir / STATISTICS, stats)
    atomic_write_json(
        out_dir / MERGED,
        {
            "created": stats["completed_at"],
            "data_config": {**shards[0].data_config, "shard.count": shards[0].count},
            "shards": [{"dir": str(s.dir), "path": str(s.dir.resolve()), "index": s.index} for s in shards],
            "trajectories": n,
        },
    )
    stats["trajectories"] = n
    return stats
