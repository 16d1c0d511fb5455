"""Exports with a manifest, their byte-for-byte reproduction, and every format of a run or a sweep at once.

    python -m hermes_runner.export outputs/my_run --to parquet --manifest   # + export_manifest.json beside it
    python -m hermes_runner.export --reproduce outputs/my_run/export/parquet/export_manifest.json
    python -m hermes_runner.export outputs/my_sweep --to all                # every format of every job

A manifest (MANIFEST_FILE, in the export's directory) holds the run dir's identity (its path, name, and the
sha256 of every run dir file the export reads), the export's options, the provenance hash table (each hash of the
rows' `provenance` -> the text or JSON it stands for), the versions of the libraries that wrote the files, and the
sha256 of every output file. `--reproduce` checks the run dir files first (a changed or new one is named), rebuilds
the export in a scratch directory, compares every file, and only then puts the files in place.

An export is built in a scratch directory and moved into place, so the files a manifest lists are exactly the
files that export wrote (no leftovers of an earlier export in the same directory). The writers are deterministic:
the rows come in ledger order, JSON is written with fixed separators, and `datasets` derives the fingerprint in
state.json from the data (the e2e test rebuilds every format in a new process and compares the bytes).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from hermes_runner.errors import ExportError, NotReproduced
from hermes_runner.rundir.layout import (
    BATCH_GLOB,
    DISCARDED,
    FAILURES,
    FEATURES_FILE,
    HASHES,
    INVOCATIONS,
    LEDGER,
    MANIFEST,
    MERGED,
    RESCORED,
    TIMELINE,
    TOKENS,
    TRAJECTORIES,
)
from hermes_runner.rundir.reader import RunData, find_runs, read_jsonl
from hermes_runner.rundir.store import atomic_write_json
from hermes_runner.trajectory.export import ATIF_INDEX, FORMATS, export

log = logging.getLogger(__name__)

MANIFEST_FILE = "export_manifest.json"
MANIFEST_VERSION = 1
ALL = "all"  # --to all: every name in FORMATS
OPTIONS = (
    "reasoning",
    "min_reward",
    "best",
    "pass_fail",
    "only_completed",
    "arguments",
    "discarded",
    "drift",
)  # export()'s
# Options that only some formats take: with --to all each format gets those that apply to it (the others refuse them).
ONLY_FOR = {"pass_fail": ("splits",), "discarded": ("atif",)}
NOT_FOR = {"inspect": ("min_reward", "best", "only_completed")}  # the inspect log is the whole run
VERSIONED = ("hermes-runner", "datasets", "pyarrow")
_INPUTS = (
    LEDGER,
    RESCORED,
    DISCARDED,
    MANIFEST,
    INVOCATIONS,
    HASHES,
    FEATURES_FILE,
    MERGED,
    FAILURES,
    TIMELINE,
    TOKENS,
)


@dataclass(frozen=True)
class Exported:
    """One export made: of which run, in which format, where, its rows per split, and its manifest (if any)."""

    run_dir: Path
    fmt: str
    path: Path
    counts: dict[str, int]
    manifest: Path | None


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fp:
        for chunk in iter(lambda: fp.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def versions() -> dict[str, str | None]:
    """The versions of the packages that write the files (None: not installed), and Python's."""
    out: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    out["python"] = ".".join(map(str, sys.version_info[:3]))
    return out


def run_inputs(run: RunData) -> dict[str, str]:
    """The sha256 of every run dir file an export reads, by its path relative to the run dir (a merged dir's
    shards included)."""
    out: dict[str, str] = {}
    for d in [run.dir, *run.merged_from]:
        names = [*_INPUTS, *(p.name for p in d.glob(BATCH_GLOB))]
        if (d / MERGED).is_file() and not (d / LEDGER).is_file():
            names.append(TRAJECTORIES)  # a merged dir without its shards reads its own trajectories
        for name in sorted(set(names)):
            if (d / name).is_file():
                out[os.path.relpath(d / name, run.dir)] = sha256_file(d / name)
    return out


def _outputs(target: Path) -> dict[str, str]:
    return {
        p.relative_to(target).as_posix(): sha256_file(p)
        for p in sorted(target.rglob("*"))
        if p.is_file() and p.name != MANIFEST_FILE
    }


def _build(run_dir: Path, fmt: str, target: Path, options: dict) -> tuple[Path, Path, dict, dict]:
    """Export into a scratch directory beside `target`: (scratch dir, its path of the export, counts, hash table)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".export", dir=target.parent))
    table: dict[str, Any] = {}
    try:
        path, counts = export(run_dir, fmt, scratch / "out", table=table, **options)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return scratch, path, counts, table


def _previous(target: Path) -> set[str]:
    """The files an earlier export left in `target`, as its manifest or its ATIF index lists them."""
    names: set[str] = set()
    with contextlib.suppress(OSError, ValueError, AttributeError):
        names |= set(json.loads((target / MANIFEST_FILE).read_text()).get("outputs") or {})
    names |= {str(r.get("file")) for r in read_jsonl(target / ATIF_INDEX) if r.get("file")}
    return {n for n in names if n and not Path(n).is_absolute() and ".." not in Path(n).parts}


def _install(scratch: Path, target: Path, files: list[str]) -> None:
    """Move the built files into `target` (replacing files of the same names), remove those of an earlier export
    that this one has not made (and its manifest: export_one writes a new one when asked), then the scratch dir."""
    stale = _previous(target) - set(files)
    for rel in files:
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(scratch / "out" / rel, dest)
    for rel in [*stale, MANIFEST_FILE]:
        (target / rel).unlink(missing_ok=True)
    shutil.rmtree(scratch, ignore_errors=True)


def export_one(run_dir: Path | str, fmt: str, out: Path | str | None, options: dict, manifest: bool) -> Exported:
    """One export of one run, built aside then moved into place; with `manifest`, its manifest beside the files."""
    run_dir = Path(run_dir)
    target = Path(out) if out else run_dir / "export" / fmt
    run = RunData.load(run_dir) if manifest else None
    inputs = run_inputs(run) if run else {}
    scratch, path, counts, table = _build(run_dir, fmt, target, options)
    outputs = _outputs(scratch / "out")
    _install(scratch, target, list(outputs))
    path = target / path.relative_to(scratch / "out")
    if run is None:
        return Exported(run_dir, fmt, path, counts, None)
    if run.live:
        log.warning("%s is still being written: its manifest reproduces only until the run writes again", run_dir)
    body = {
        "manifest_version": MANIFEST_VERSION,
        "run": {
            "dir": str(run_dir.resolve()),
            "name": run.name,
            "created": run.manifest.get("created"),
            "inputs": inputs,
        },
        "export": {"format": fmt, "options": {k: options.get(k) for k in OPTIONS if k in options}},
        "versions": versions(),
        "counts": counts,
        "outputs": outputs,
        "hashes": dict(sorted(table.items())),
    }
    atomic_write_json(target / MANIFEST_FILE, body)
    return Exported(run_dir, fmt, path, counts, target / MANIFEST_FILE)


def export_many(
    path: Path | str, fmt: str, out: Path | str | None, options: dict, manifest: bool = False
) -> list[Exported]:
    """`fmt` (or every format, ALL) of a run, or of every job of a sweep: each into `<job>/export/<format>`, or
    under `out` (`out/<format>`; a sweep's `out/<job>/<format>`)."""
    fmts = FORMATS if fmt == ALL else (fmt,)
    if fmt != ALL and fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; choose {ALL} or one of {', '.join(FORMATS)}")
    root = Path(path)
    runs = find_runs(root)
    sweep = runs != [root]
    done = []
    for run_dir in runs:
        for f in fmts:
            if fmt == ALL and f == "tokens" and not (run_dir / TOKENS).exists():
                continue  # (a run without output.tokens has no token ids: --to tokens refuses it)
            target = None  # the default: <job>/export/<format>
            if out:
                base = Path(out) / run_dir.relative_to(root) if sweep else Path(out)
                target = base / f if sweep or fmt == ALL else base
            opts = _options_for(f, options) if fmt == ALL else options
            done.append(export_one(run_dir, f, target, opts, manifest))
    return done


def _options_for(fmt: str, options: dict) -> dict:
    """`options` less those `fmt` does not take (each set to its off value)."""
    off = {k for k, fmts in ONLY_FOR.items() if fmt not in fmts} | set(NOT_FOR.get(fmt, ()))
    return {k: (None if k == "min_reward" else False) if k in off else v for k, v in options.items()}


def reproduce(manifest_path: Path | str, run_dir: Path | str | None = None, out: Path | str | None = None) -> Exported:
    """Rebuild the export a manifest describes, byte for byte, from its run dir (or `run_dir`, e.g. the run dir
    moved), into `out` (default: the manifest's directory); NotReproduced names the first file that differs."""
    manifest_path = Path(manifest_path)
    try:
        m = json.loads(manifest_path.read_text())
        run_dir = Path(run_dir or m["run"]["dir"])
        fmt, expected = m["export"]["format"], m["outputs"]
        options = {k: v for k, v in m["export"]["options"].items() if k in OPTIONS}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ExportError(f"{manifest_path} is not an export manifest ({type(e).__name__}: {e})") from None
    if m.get("manifest_version") != MANIFEST_VERSION:
        raise ExportError(f"{manifest_path}: manifest version {m.get('manifest_version')!r}, not {MANIFEST_VERSION}")
    _check_inputs(run_dir, m["run"].get("inputs") or {})
    target = Path(out) if out else manifest_path.parent
    scratch, path, counts, _ = _build(run_dir, fmt, target, options)
    built = _outputs(scratch / "out")
    for rel, sha in expected.items():
        problem = "was not rebuilt" if rel not in built else None if built[rel] == sha else "differs"
        if problem:
            shutil.rmtree(scratch, ignore_errors=True)
            now, then = versions(), m.get("versions") or {}
            changed = [f"{k} {then.get(k)} -> {v}" for k, v in now.items() if then.get(k) != v]
            hint = f" (versions changed: {', '.join(changed)})" if changed else ""
            raise NotReproduced(f"{target / rel}: the rebuilt file {problem} from the manifest's{hint}")
    if extra := sorted(set(built) - set(expected)):
        shutil.rmtree(scratch, ignore_errors=True)
        raise NotReproduced(f"{target / extra[0]}: rebuilt, but not in the manifest {manifest_path}")
    _install(scratch, target, list(built))
    if target.resolve() != manifest_path.parent.resolve():
        shutil.copyfile(manifest_path, target / MANIFEST_FILE)
    return Exported(run_dir, fmt, target / path.relative_to(scratch / "out"), counts, target / MANIFEST_FILE)


def _check_inputs(run_dir: Path, recorded: dict[str, str]) -> None:
    """NotReproduced naming the first run dir file that changed, went missing or appeared since the export."""
    if not run_dir.is_dir():
        raise NotReproduced(f"{run_dir}: the manifest's run dir is not there (give its new place as RUN_DIR)")
    now = run_inputs(RunData.load(run_dir))
    for rel, sha in recorded.items():
        if rel not in now:
            raise NotReproduced(f"{run_dir / rel}: in the run dir when it was exported, missing now")
        if now[rel] != sha:
            raise NotReproduced(f"{run_dir / rel}: changed since the export (sha256 {sha[:12]} -> {now[rel][:12]})")
    if new := sorted(set(now) - set(recorded)):
        raise NotReproduced(f"{run_dir / new[0]}: new in the run dir since the export")
