"""Adopting a run directory written by the original Hermes batch runner (hermes-agent's batch_runner.py).

Its directory holds `batch_N.jsonl` (one trajectory per finished prompt), `checkpoint.json` (finished dataset
indices, discarded prompts included), `trajectories.jsonl` and `statistics.json`, and no ledger. Pointed at
one, the runner imports the finished prompts into its ledger before planning, matching them to the dataset
by prompt text the way the original's `--resume` does, so they cost no model call:

* the ledger points at their lines where they are: their `batch_N.jsonl` stay in place, untouched (ours are
  numbered after them; `trajectories.jsonl` holds their rows in our keys and types, trajectory.entry.conform), and
  the original's own `--resume` still sees every finished prompt; the files this runner rewrites
  (`checkpoint.json`, `statistics.json`, `trajectories.jsonl`) move, unchanged, to `hermes_original/`;
* a prompt that the checkpoint lists without a line (the original discards prompts without reasoning that
  way) is recorded as discarded (`no_reasoning`), with a tombstone line in `discarded.jsonl`;
* whatever it cannot tell (a torn or unreadable line, a trajectory that matches no prompt of the dataset
  or several different ones, checkpoint indices that do not match the dataset) stops the run with
  ForeignRunDirError and touches nothing, so a half-written directory is never paid for again silently.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hermes_runner.config import DatasetConfig
from hermes_runner.dataset import Prompt, read_prompts
from hermes_runner.errors import ForeignRunDirError
from hermes_runner.rundir.layout import CHECKPOINT, STATISTICS, TRAJECTORIES
from hermes_runner.rundir.manifest import MANIFEST, now
from hermes_runner.rundir.store import BATCH_RE, DISCARDED, LEDGER, LedgerState, Ref, atomic_write, dumps_line

log = logging.getLogger(__name__)

ORIGINAL_DIR = "hermes_original"  # where the original's files go, unchanged
MERGED = TRAJECTORIES
OTHER_FILES = (CHECKPOINT, STATISTICS, MERGED)
_THINK = re.compile(r"<think>\s*\S")


@dataclass(slots=True)
class _Line:
    file: str  # name of the original's file
    batch: int
    offset: int
    length: int
    entry: dict  # what the ledger record needs of it (_slim)
    text: str  # first human turn, stripped


def _files(run_dir: Path) -> dict[str, Path]:
    """The original's files by name: batch files in the run dir, the others there or already in ORIGINAL_DIR."""
    found: dict[str, Path] = {}
    for where in (run_dir / ORIGINAL_DIR, run_dir):
        if not where.is_dir():
            continue
        for p in where.iterdir():
            if p.is_file() and (p.name in OTHER_FILES or (where == run_dir and BATCH_RE.match(p.name))):
                if p.name in found:
                    raise ForeignRunDirError(
                        f"{p.name} is both in {run_dir} and in {run_dir / ORIGINAL_DIR}: cannot tell which is the "
                        "original runner's; keep one of them and run again"
                    )
                found[p.name] = p
    return found


def is_foreign(run_dir: Path) -> bool:
    """A run dir with the original's files and none of ours (no ledger, no run.json)."""
    run_dir = Path(run_dir)
    if (run_dir / LEDGER).exists() or (run_dir / MANIFEST).exists() or not run_dir.is_dir():
        return False
    return (run_dir / ORIGINAL_DIR).is_dir() or any(
        BATCH_RE.match(p.name) or p.name in OTHER_FILES for p in run_dir.iterdir() if p.is_file()
    )


def _first_human(entry: object) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("conversations"), list):
        return None
    for turn in entry["conversations"]:
        if isinstance(turn, dict) and turn.get("from") == "human":
            value = turn.get("value")
            return value.strip() if isinstance(value, str) else None
    return None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _slim(entry: dict) -> dict:
    """What the ledger record needs of a line (the conversation itself stays on disk)."""
    gpt = [t.get("value") for t in entry["conversations"] if isinstance(t, dict) and t.get("from") == "gpt"]
    stats = entry.get("tool_stats")
    return {
        "prompt_index": entry.get("prompt_index"),
        "ts": (entry.get("metadata") or {}).get("timestamp"),
        "api_calls": _int(entry.get("api_calls")),
        "toolsets": [t for t in entry.get("toolsets_used") or () if isinstance(t, str)],
        "completed": bool(entry.get("completed")),
        "partial": bool(entry.get("partial")),
        "turns": len(gpt),
        "reasoning_turns": sum(1 for v in gpt if isinstance(v, str) and _THINK.search(v)),
        "tools": {
            name: [_int(s.get("count")), _int(s.get("failure"))]
            for name, s in (stats.items() if isinstance(stats, dict) else ())
            if isinstance(s, dict) and _int(s.get("count"))
        },
    }


def _read_lines(name: str, path: Path) -> list[_Line]:
    m = BATCH_RE.match(name)
    lines: list[_Line] = []
    offset = 0
    with path.open("rb") as fp:
        for no, raw in enumerate(fp, 1):
            where = f"{name} line {no}"
            if not raw.endswith(b"\n"):
                raise ForeignRunDirError(
                    f"the original runner's {where} is half-written ({len(raw)} bytes, no newline): it was stopped "
                    "while writing it. Cannot tell whether that prompt finished; delete the torn line (its prompt "
                    "then runs again) or let the original runner finish, then run again"
                )
            if raw.strip():
                try:
                    entry = json.loads(raw)
                except ValueError as exc:
                    raise ForeignRunDirError(f"the original runner's {where} is not JSON ({exc})") from None
                text = _first_human(entry)
                if not text:
                    raise ForeignRunDirError(f"{where} holds no trajectory with a human turn: not a Hermes run dir?")
                if not entry.get("failed"):  # as the original's resume: failed entries are not done
                    batch = int(m.group(1)) if m else _int((entry.get("metadata") or {}).get("batch_num"))
                    lines.append(_Line(name, batch, offset, len(raw), _slim(entry), text))
            offset += len(raw)
    return lines


def _checkpoint(path: Path | None) -> set[int]:
    if path is None:
        return set()
    try:
        data = json.loads(path.read_text())
        done = data["completed_prompts"]
        if not isinstance(done, list) or not all(isinstance(i, int) for i in done):
            raise TypeError("completed_prompts is not a list of indices")
    except (ValueError, KeyError, TypeError) as exc:
        raise ForeignRunDirError(
            f"the original runner's {CHECKPOINT} is unreadable ({exc}): cannot tell which prompts it finished"
        ) from None
    return set(done)


def _match(lines: list[_Line], prompts: list[Prompt], dataset: str) -> list[tuple[_Line, Prompt]]:
    """Each trajectory to the dataset row it belongs to: by text, and by index among rows of the same text."""
    by_text: dict[str, list[Prompt]] = defaultdict(list)
    for p in prompts:
        by_text[p.prompt.strip()].append(p)
    unmatched = [ln for ln in lines if ln.text not in by_text]
    if unmatched:
        raise ForeignRunDirError(
            f"{len(unmatched)} of the original runner's trajectories match no prompt of {dataset} (first: "
            f"{unmatched[0].file}, prompt {unmatched[0].text[:80]!r}): is this the dataset that run used?"
        )
    taken: set[str] = set()
    out: list[tuple[_Line, Prompt]] = []
    extra = 0
    pinned = [ln for ln in lines if any(p.index == ln.entry.get("prompt_index") for p in by_text[ln.text])]
    for ln in pinned:  # a duplicated prompt's trajectory whose index names one of its rows takes that row
        p = next(p for p in by_text[ln.text] if p.index == ln.entry.get("prompt_index"))
        if p.key in taken:
            extra += 1
            continue
        taken.add(p.key)
        out.append((ln, p))
    pinned_ids = {id(ln) for ln in pinned}
    for ln in (ln for ln in lines if id(ln) not in pinned_ids):
        free = [p for p in by_text[ln.text] if p.key not in taken]
        if not free:
            extra += 1  # the same prompt done twice: the first line counts, the others stay in their file
            continue
        if len({p.key.rsplit("-", 1)[0] for p in free}) > 1:
            raise ForeignRunDirError(
                f"{ln.file}: the trajectory of prompt {ln.text[:80]!r} fits {len(free)} different rows of "
                f"{dataset} (same prompt, other fields differ) and its prompt_index names none of them: cannot "
                "tell which one it belongs to"
            )
        taken.add(free[0].key)
        out.append((ln, free[0]))
    if extra:
        log.warning(
            "%d of the original runner's trajectories repeat a prompt already imported (kept in its files)", extra
        )
    return out


def _record(ln: _Line, p: Prompt) -> dict:
    """The ledger record of an imported trajectory (what runner.classify and _summary would have written)."""
    e = ln.entry
    return {
        "key": p.key,
        "index": e["prompt_index"] if isinstance(e["prompt_index"], int) else p.index,  # as written in the line
        "inv": -1,
        "ts": e["ts"] if isinstance(e["ts"], str) else now(),
        "api_calls": e["api_calls"],
        "retries": 0,
        "duration_s": 0.0,
        "toolsets": e["toolsets"],
        "usage": {},
        "completed": e["completed"],
        "partial": e["partial"],
        "stop": None,
        "turns": e["turns"],
        "reasoning_turns": e["reasoning_turns"],
        "tools": e["tools"],
        "unknown_tools": {},
        "imported": "hermes",
        "status": "ok",
        "file": ln.file if BATCH_RE.match(ln.file) else f"{ORIGINAL_DIR}/{ln.file}",  # batch files stay put
        "offset": ln.offset,
        "length": ln.length,
        "batch": ln.batch,
    }


def adopt(
    run_dir: Path, dataset_file: str, dataset: DatasetConfig, resume: bool = True, write: bool = True
) -> list[dict] | None:
    """Import the original runner's finished prompts, matched to the rows of `dataset_file` (read as `dataset`
    says), into a new ledger (see the module doc).

    Returns the ledger records of the imported prompts, None when `run_dir` is not the original's. Raises
    ForeignRunDirError (nothing changed) when it cannot tell. `write=False` (dry run) changes nothing on disk:
    `preview` then adds the records to the loaded ledger state.
    """
    run_dir = Path(run_dir)
    if not is_foreign(run_dir):
        return None
    if not resume:
        raise ForeignRunDirError(
            f"{run_dir} holds a run of the original Hermes batch runner and resume=false: drop resume=false to "
            "import its finished prompts, or choose another run_name"
        )
    files = _files(run_dir)
    batches = sorted((n for n in files if BATCH_RE.match(n)), key=lambda n: int(BATCH_RE.match(n).group(1)))
    sources = batches or ([MERGED] if MERGED in files else [])  # no batch files: its merge has the same lines
    lines = [ln for name in sources for ln in _read_lines(name, files[name])]
    done_idx = _checkpoint(files.get(CHECKPOINT))
    prompts = list(read_prompts(dataset_file, options=dataset))  # the whole dataset: max_samples/shard change no key
    matched = _match(lines, prompts, dataset_file)
    by_index = {p.index: p for p in prompts}
    # Checkpointed indices without a line: discarded by the original. Only where its indices are ours.
    no_line = sorted(done_idx - {ln.entry.get("prompt_index") for ln in lines})
    consistent = all(p.index == ln.entry.get("prompt_index") for ln, p in matched)
    if no_line and not (consistent and all(i in by_index for i in no_line)):
        raise ForeignRunDirError(
            f"the original runner's {CHECKPOINT} lists {len(no_line)} finished prompts without a trajectory "
            f"(discarded, e.g. without reasoning), and its indices do not match {dataset_file}: cannot tell "
            f"which prompts they are. Remove {CHECKPOINT} to run them again, or use the dataset that run used"
        )
    imported = {p.key for _, p in matched}
    tombstones = [by_index[i] for i in no_line if by_index[i].key not in imported]
    log.warning(
        "%s was written by the original Hermes batch runner: importing %d finished prompts%s without model calls; "
        "its batch files stay as they are, its checkpoint, statistics and merged trajectories move to %s/",
        run_dir, len(matched), f" and {len(tombstones)} discarded ones" if tombstones else "", ORIGINAL_DIR,
    )  # fmt: skip
    records = [_record(ln, p) for ln, p in matched] + _tombstones(run_dir, tombstones, write)
    if not write:
        return records
    (run_dir / ORIGINAL_DIR).mkdir(exist_ok=True)
    for name, path in files.items():
        if name in OTHER_FILES and path.parent == run_dir:
            os.replace(path, run_dir / ORIGINAL_DIR / name)
    atomic_write(run_dir / LEDGER, b"".join(dumps_line(r) for r in records))  # all at once: a crash redoes it
    return records


def _tombstones(run_dir: Path, prompts: list[Prompt], write: bool) -> list[dict]:
    """The records of the prompts the original discarded without a line: each with one in discarded.jsonl."""
    records, data, offset = [], [], 0
    for p in prompts:
        line = dumps_line({
            "prompt_index": p.index, "conversations": [{"from": "human", "value": p.prompt}],
            "discard_reason": "no_reasoning", "imported": "hermes",
        })  # fmt: skip
        records.append({
            "key": p.key, "index": p.index, "inv": -1, "ts": now(), "api_calls": 0, "toolsets": [],
            "usage": {}, "reason": "no_reasoning", "imported": "hermes", "status": "discarded",
            "file": DISCARDED, "offset": offset, "length": len(line), "batch": -1,
        })  # fmt: skip
        data.append(line)
        offset += len(line)
    if data and write:
        atomic_write(run_dir / DISCARDED, b"".join(data))
    return records


def preview(state: LedgerState, records: list[dict] | None, on_record: Callable[[dict], None]) -> None:
    """Dry run: count the records `adopt(write=False)` would have written as if loaded from the ledger."""
    for rec in records or ():
        state.terminal[rec["key"]] = Ref(rec["status"], rec["file"], rec["offset"], rec["length"], rec["index"], -1)
        on_record(rec)
