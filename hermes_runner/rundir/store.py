"""The run directory on disk: append-only logs, the ledger of dispositions, atomic rewrites.

Every prompt that ends gets one terminal record in `ledger.jsonl` (ok / discarded), or a
`failed` record that a later attempt may supersede. Trajectories go to `batch_N.jsonl`
(kept) or `discarded.jsonl`, and the ledger points at their bytes, so the derived files
(`trajectories.jsonl`, `statistics.json`, `checkpoint.json`) are always rebuilt from it.
Every model call is appended to `usage.jsonl` as it starts and ends, so the spend of prompts
that never reach the ledger (cancelled, or the runner killed) is known too.

Rescoring a finished run (`hermes-score`) appends each re-scored entry to `rescored.jsonl` and a
`rescored` record that points at it: the latest such record of a terminal prompt is where its entry
lives from then on (its status stays; the batch files keep the entries as they were generated).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from hermes_runner.errors import RunDirBusy
from hermes_runner.rundir.layout import (  # noqa: F401  (re-exported)
    BATCH_FILE,
    BATCH_GLOB,
    BATCH_RE,
    DISCARDED,
    FAILURES,
    LEDGER,
    LOCK,
    RESCORED,
    TIMELINE,
    TOKENS,
    USAGE,
)
from hermes_runner.util import fastjson
from hermes_runner.util.appendlog import AppendLog  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)

TERMINAL = ("ok", "discarded")
RESCORED_STATUS = "rescored"  # a record that moves a terminal prompt's entry to its re-scored line
CHANGED = "changed"  # a note, not a disposition: a finished prompt's row was edited since it ran (same id)
TMP_SUFFIX = ".hr-tmp"  # the temp files of atomic_write, and only those, end with it
# Temp files of atomic writes before TMP_SUFFIX: a mkstemp name after one of the run dir's rewritten files.
_LEGACY_TMP = re.compile(
    r"^\.(trajectories\.jsonl|statistics\.json|checkpoint\.json|run\.json|rejected\.jsonl|report\.html)"
    r"\.[a-z0-9_]{8}$"
)


def atomic_write(path: Path, data: bytes | Iterable[bytes]) -> None:
    """Replace `path` atomically: write a temp file in the same dir, fsync, rename.

    A kill leaves the temp file (named `.<name>.XXXXXXXX.hr-tmp`); `remove_stale_temps` removes it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fp:
            if isinstance(data, bytes):
                fp.write(data)
            else:
                for chunk in data:
                    fp.write(chunk)
            fp.flush()
            os.fchmod(fp.fileno(), 0o644)
            os.fsync(fp.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def remove_stale_temps(directory: Path) -> list[str]:
    """Remove the temp files that killed atomic writes left in `directory` (call it holding the dir's lock)."""
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            name = entry.name
            if name.startswith(".") and (name.endswith(TMP_SUFFIX) or _LEGACY_TMP.match(name)) and entry.is_file():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed.append(name)
    if removed:
        log.info("removed %d temp files left by an interrupted write: %s", len(removed), ", ".join(sorted(removed)))
    return removed


def atomic_write_json(path: Path, obj: object) -> None:
    atomic_write(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode())


def dumps_line(obj: object) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(", ", ": ")) + "\n").encode()


def iter_lines(path: Path) -> Iterable[bytes]:
    """Complete lines of a JSONL file (a torn last line is skipped)."""
    with path.open("rb") as fp:
        for line in fp:
            if line.endswith(b"\n"):
                yield line


@dataclass(slots=True)
class Ref:
    """Where a terminal record's trajectory lives."""

    status: str
    file: str
    offset: int
    length: int
    index: int  # prompt_index written in the entry
    batch: int
    digest: str = ""  # what the prompt was when it ran (rows with ids, see dataset.Prompt.digest)
    sample: int = 0  # which of its row's samples (samples_per_prompt)


@dataclass
class LedgerState:
    terminal: dict[str, Ref] = field(default_factory=dict)
    failed: dict[str, dict] = field(default_factory=dict)  # latest failure of keys not yet terminal
    records: int = 0
    next_batch: int = 0
    attempts: set[tuple[str, int]] = field(default_factory=set)  # (key, invocation) of every record
    foreign: set[str] = field(default_factory=set)  # files of imported trajectories (another runner's layout)


@dataclass
class CallLog:
    """What `usage.jsonl` holds: every model call, recorded as it starts and as it ends."""

    started: int = 0
    answered: int = 0
    failed: int = 0  # attempts that ended in an error (retried, or the prompt's failure)
    # Calls of prompts that never reached the ledger in that invocation (cancelled, or the runner was killed):
    # the ledger's records carry the spend of all the others.
    unrecorded_usage: dict = field(default_factory=dict)
    unrecorded_api_calls: int = 0  # answered calls of the run's model among them
    unrecorded_errors: int = 0

    @property
    def unanswered(self) -> int:
        """Calls that never got an answer: in flight when their prompt was cancelled or the runner killed."""
        return max(0, self.started - self.answered - self.failed)

    def add(self, rec: dict, recorded: bool) -> None:
        """Count one event; `recorded`: its prompt has a ledger record of that invocation."""
        event = rec["event"]
        if event == "start":
            self.started += 1
        elif event == "end":
            self.answered += 1
            if not recorded:
                self.unrecorded_api_calls += rec.get("model") == "main"
                unrecorded = self.unrecorded_usage
                for name, value in (rec.get("usage") or {}).items():
                    if isinstance(value, int | float):
                        unrecorded[name] = unrecorded.get(name, 0) + value
        elif event == "error":
            self.failed += 1
            self.unrecorded_errors += not recorded


_PRELOCKED: dict[str, tuple[int, list[Path]]] = {}  # run dir -> (lock fd, what taking it created): see `prelock`


def _take_lock(run_dir: Path) -> int:
    """flock `run_dir/.lock` for this process, writing nothing else; RunDirBusy when a live process holds it."""
    while True:
        fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise RunDirBusy(f"{run_dir} is in use by {holder}") from None
        try:
            if os.stat(run_dir / LOCK).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # a refused runner removed the file it had made (`abandon`) after we opened it: again


def _make_and_lock(run_dir: Path) -> tuple[int, list[Path]]:
    """Make the run dir (and its parents) and take its lock: (lock fd, the paths this created, deepest first)."""
    made = [p for p in (run_dir, *run_dir.parents) if not p.exists()]
    run_dir.mkdir(parents=True, exist_ok=True)
    lock_made = not (run_dir / LOCK).exists()
    fd = _take_lock(run_dir)
    return fd, ([run_dir / LOCK] if lock_made else []) + made


def prelock(run_dir: Path) -> None:
    """Take a run dir's lock early (before Hydra writes into it); `RunStore.lock` adopts it."""
    run_dir = Path(run_dir)
    key = str(run_dir.resolve())
    if key not in _PRELOCKED:
        _PRELOCKED[key] = _make_and_lock(run_dir)


def abandon_prelock(run_dir: Path) -> None:
    """The run refused its config before it made its store: undo `prelock` (see `RunStore.abandon`)."""
    RunStore(run_dir).abandon()


class LedgerReader:
    """Reads a run directory back: the ledger, the call log and the entries the ledger points at (a live run's
    too: it takes no lock and, with `repair=False`, writes nothing)."""

    def __init__(self, run_dir: Path):
        self.dir = Path(run_dir)

    def load(self, on_record: Callable[[dict], None] | None = None, repair: bool = True) -> LedgerState:
        """Read the ledger (repairing a torn tail unless `repair` is false, e.g. for a reader of
        a live run); call `on_record` for every record kept."""
        state = LedgerState()
        path = self.dir / LEDGER
        existing = [int(m.group(1)) for p in self.dir.glob(BATCH_GLOB) if (m := BATCH_RE.match(p.name))]
        state.next_batch = max(existing, default=-1) + 1
        if path.exists():
            if repair:
                AppendLog(path).close()  # repair only
            sizes: dict[str, int] = {}
            for raw in iter_lines(path):
                try:
                    rec = fastjson.loads(raw)
                    key, status = rec["key"], rec["status"]
                except (ValueError, KeyError, TypeError):
                    log.warning("%s: skipping an unreadable record", LEDGER)
                    continue
                if status == CHANGED:  # a note: the row of a finished prompt changed since (its id is the same)
                    if key in state.terminal:
                        state.terminal[key].digest = rec.get("digest", "")
                    continue
                state.records += 1
                state.attempts.add((key, rec.get("inv", -1)))
                if status == RESCORED_STATUS:
                    if self._apply_rescored(state, rec, sizes) and on_record:
                        on_record(rec)
                    continue
                if key in state.terminal:
                    continue  # exactly once: the first terminal record wins
                if status in TERMINAL:
                    fname = rec["file"]
                    if not self._within(rec, fname, sizes):
                        log.warning("ledger points past the end of %s; prompt %s will run again", fname, key)
                        continue
                    state.terminal[key] = Ref(
                        status, fname, rec["offset"], rec["length"], rec["index"], rec.get("batch", -1),
                        rec.get("digest", ""),
                        rec.get("sample", 0),
                    )  # fmt: skip
                    if rec.get("imported"):
                        state.foreign.add(fname)
                    state.failed.pop(key, None)
                elif status == "failed":
                    state.failed[key] = rec
                else:
                    continue
                if on_record:
                    on_record(rec)
                state.next_batch = max(state.next_batch, rec.get("batch", -1) + 1)
        return state

    def _apply_rescored(self, state: LedgerState, rec: dict, sizes: dict[str, int]) -> bool:
        """Point a terminal prompt at its re-scored entry; False when the record cannot apply."""
        ref = state.terminal.get(rec["key"])
        fname = rec.get("file", "")
        if ref is None or not fname:
            return False
        if not self._within(rec, fname, sizes):
            log.warning("ledger points past the end of %s; the rescoring of %s is not applied", fname, rec["key"])
            return False
        ref.file, ref.offset, ref.length = fname, rec["offset"], rec["length"]
        return True

    def _within(self, rec: dict, fname: str, sizes: dict[str, int]) -> bool:
        """Whether the bytes `rec` points at are in `fname` (`sizes`: the sizes of the files seen so far)."""
        if fname not in sizes:
            sizes[fname] = (self.dir / fname).stat().st_size if (self.dir / fname).exists() else -1
        return rec["offset"] + rec["length"] <= sizes[fname]

    def load_calls(self, attempts: set[tuple[str, int]]) -> CallLog:
        """Read `usage.jsonl`; the spend of calls whose (prompt, invocation) has no ledger record in
        `attempts` goes to `unrecorded_*` (the ledger's records carry the spend of the others)."""
        calls = CallLog()
        path = self.dir / USAGE
        if not path.exists():
            return calls
        for raw in iter_lines(path):
            try:
                rec = fastjson.loads(raw)
                calls.add(rec, (rec["key"], rec["inv"]) in attempts)
            except (ValueError, KeyError, TypeError):
                log.warning("%s: skipping an unreadable record", USAGE)
        return calls

    def read_entry(self, ref: Ref, handles: dict[str, int]) -> bytes:
        fd = handles.get(ref.file)
        if fd is None:
            fd = handles[ref.file] = os.open(self.dir / ref.file, os.O_RDONLY)
        return os.pread(fd, ref.length, ref.offset)


class RunStore(LedgerReader):
    """Single writer of a run directory: its lock, its append-only logs and their fsyncs."""

    def __init__(self, run_dir: Path):
        super().__init__(run_dir)
        self._made: list[Path] = []  # what taking the dir created (the dir, its .lock): `abandon` removes it
        self._lock_fd = -1
        self._batches: dict[int, AppendLog] = {}
        self._closing: list[AppendLog] = []  # finished batch files, fsynced and closed by the next sync
        self._logs: dict[str, AppendLog] = {}  # ledger.jsonl, discarded.jsonl, ... by name, once written to
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()  # one sync at a time (the background one and the final one)

    def lock(self, claim: bool = True) -> None:
        """Take the run directory for this process (released when the process ends, even by kill -9); `claim`:
        write this pid into the lock file now (False: `claim()` does, once the directory's checks passed)."""
        self._lock_fd, self._made = _PRELOCKED.pop(str(self.dir.resolve()), None) or _make_and_lock(self.dir)
        if claim:
            self.claim()

    def claim(self) -> None:
        """Say in the lock file who holds the directory (a refused runner says nothing there)."""
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, f"pid {os.getpid()}\n".encode(), 0)

    def unlock(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def abandon(self) -> None:
        """The run refused its directory: remove what taking it created (its .lock, the dir itself when empty),
        holding the lock, so the directory is as it was; then unlock. (A lock `prelock` took and the store did
        not adopt yet is undone the same way.)"""
        if self._lock_fd < 0 and (taken := _PRELOCKED.pop(str(self.dir.resolve()), None)) is not None:
            self._lock_fd, self._made = taken
        for path in self._made if self._lock_fd >= 0 else ():
            with contextlib.suppress(OSError):  # (a dir something else wrote into stays)
                path.unlink() if path.name == LOCK else path.rmdir()
        self._made = []
        self.unlock()

    # -- writing -------------------------------------------------------------------

    def write_usage(self, record: dict) -> None:
        """Append one model-call event to `usage.jsonl` (fsynced with the ledger)."""
        line = dumps_line(record)
        with self._lock:
            self._log(USAGE).append(line)

    def write_timeline(self, record: dict) -> None:
        """Append one prompt attempt's timed calls to `timeline.jsonl` (written before its ledger record)."""
        line = dumps_line(record)
        with self._lock:
            self._log(TIMELINE).append(line)

    def write_tokens(self, record: dict) -> None:
        """Append one prompt attempt's token ids to the tokens/ sidecar (written before its ledger record); orjson:
        thousands of ids a call, and no text whose encoding matters."""
        line = fastjson.dumps(record) + b"\n"
        with self._lock:
            if TOKENS not in self._logs:
                (self.dir / TOKENS).parent.mkdir(exist_ok=True)
            self._log(TOKENS).append(line)

    def _log(self, name: str) -> AppendLog:
        if (log_ := self._logs.get(name)) is None:
            log_ = self._logs[name] = AppendLog(self.dir / name)
        return log_

    def _open_logs(self) -> list[AppendLog]:
        """The logs open, the batch files first and the ledger last (a record is synced after what it points at)."""
        return [*self._batches.values(), *sorted(self._logs.values(), key=lambda lg: lg.path.name == LEDGER)]

    def _batch(self, num: int) -> AppendLog:
        b = self._batches.get(num)
        if b is None:
            b = self._batches[num] = AppendLog(self.dir / BATCH_FILE.format(num), repair=False)
        return b

    def write_trajectory(self, status: str, batch: int, entry_line: bytes, record: dict) -> dict:
        """Append a kept or discarded trajectory, then its ledger record pointing at it."""
        with self._lock:
            target = self._batch(batch) if status == "ok" else self._log(DISCARDED)
            offset, length = target.append(entry_line)
            record.update(status=status, file=target.path.name, offset=offset, length=length, batch=batch)
            try:
                self._log(LEDGER).append(dumps_line(record))
            except BaseException:
                target.truncate(offset)  # no trajectory without its record (e.g. the disk filled up in between)
                raise
        return record

    def write_rescored(self, entry_line: bytes, record: dict) -> dict:
        """Append a re-scored entry to rescored.jsonl, then its `rescored` ledger record pointing at it."""
        with self._lock:
            target = self._log(RESCORED)
            offset, length = target.append(entry_line)
            record.update(status=RESCORED_STATUS, file=target.path.name, offset=offset, length=length)
            try:
                self._log(LEDGER).append(dumps_line(record))
            except BaseException:
                target.truncate(offset)
                raise
        return record

    def write_failure(self, record: dict, detail: dict) -> dict:
        with self._lock:
            record["status"] = "failed"
            failures = self._log(FAILURES)
            offset, _ = failures.append(dumps_line({**record, **detail}))
            try:
                self._log(LEDGER).append(dumps_line(record))
            except BaseException:
                failures.truncate(offset)
                raise
        return record

    def write_note(self, record: dict) -> None:
        """Append a `changed` note to the ledger (the prompt keeps its trajectory; the ledger says what changed)."""
        with self._lock:
            self._log(LEDGER).append(dumps_line({**record, "status": CHANGED}))

    def write_attempt(self, detail: dict) -> None:
        """A failed in-run attempt that was retried: into failures.jsonl only (the ledger records the outcome)."""
        with self._lock:
            self._log(FAILURES).append(dumps_line({**detail, "status": "failed", "retried": True}))

    def close_batch(self, num: int) -> None:
        """No more lines go to batch `num`; its fsync and close wait for the next sync (off the event loop)."""
        with self._lock:
            b = self._batches.pop(num, None)
            if b:
                self._closing.append(b)

    def sync(self) -> None:
        """fsync everything written since the last sync (data files before the ledger)."""
        with self._sync_lock:
            with self._lock:
                closing, self._closing = self._closing, []
                logs = [*closing, *self._open_logs()]
            for lg in logs:
                lg.sync()
            for lg in closing:
                lg.close()

    def close(self) -> None:
        self.sync()
        with self._sync_lock, self._lock:
            for lg in self._open_logs():
                lg.close()
            self._batches.clear()


_INDEX_PREFIX = re.compile(rb'^\{"prompt_index": -?\d+')


def with_prompt_index(line: bytes, index: int) -> bytes:
    """Set the prompt_index of an entry line (entries always start with it)."""
    new, n = _INDEX_PREFIX.subn(b'{"prompt_index": ' + str(index).encode(), line, count=1)
    if n:
        return new
    obj = json.loads(line)
    obj["prompt_index"] = index
    return dumps_line(obj)
