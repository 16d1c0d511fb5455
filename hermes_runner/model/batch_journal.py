"""The batch journal: what batch mode sent to the provider and what came back, fsynced line by line in the run dir.

A runner killed (or stopped) while batches are in flight resumes from it: a batch it created is polled again, not
created again; an input file it uploaded but did not see a batch for is looked up among the provider's batches
before a batch is created for it; a reply it fetched answers the replayed call again at no cost. Records (JSON
lines): ``{"t": "upload", "file", "keys"}`` before a batch is created for the file, ``{"t": "batch", "id", "file",
"keys", "attempt"}`` once it is, ``{"t": "reply", "key", "body"}`` (the provider's chat-completion body, never a
header or a key) and ``{"t": "error", "key", "error", "status"}`` per request, ``{"t": "done", "id", "status"}`` when
a batch ends. Keys are the requests' fingerprints (model/cache.py `fingerprint`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from hermes_runner.util import fastjson
from hermes_runner.util.appendlog import AppendLog

log = logging.getLogger(__name__)


@dataclass
class JournalBatch:
    """One provider batch as the journal knows it."""

    id: str
    file: str
    keys: list[str]
    attempt: int = 1  # 2: the resubmission of an expired or failed batch's requests
    status: str | None = None  # the end status once done (completed, expired, failed, cancelled)


@dataclass
class BatchJournal:
    """The journal file, read once at start and appended to (each record flushed and fsynced)."""

    path: Path
    replies: dict[str, dict] = field(default_factory=dict)  # key -> the provider's completion body
    errors: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # key -> (message, HTTP status)
    batches: dict[str, JournalBatch] = field(default_factory=dict)
    uploads: dict[str, list[str]] = field(default_factory=dict)  # input file -> keys: no batch seen for it yet
    _log: AppendLog | None = None

    @classmethod
    def open(cls, path: Path) -> BatchJournal:
        journal = cls(Path(path))
        if journal.path.exists():
            AppendLog(journal.path).close()  # a line torn by a kill is cut, so the next record starts a line
            for n, line in enumerate(journal.path.read_bytes().splitlines(), 1):
                try:
                    journal._apply(fastjson.loads(line))
                except (ValueError, KeyError, TypeError):  # a line torn by a kill: the record never happened
                    log.warning("%s line %d is not a journal record; skipped", journal.path, n)
        return journal

    def _apply(self, rec: dict) -> None:
        kind = rec["t"]
        if kind == "upload":
            self.uploads[rec["file"]] = list(rec["keys"])
        elif kind == "batch":
            self.uploads.pop(rec["file"], None)
            self.batches[rec["id"]] = JournalBatch(rec["id"], rec["file"], list(rec["keys"]), rec.get("attempt", 1))
        elif kind == "reply":
            self.replies[rec["key"]] = rec["body"]
            self.errors.pop(rec["key"], None)
        elif kind == "error":
            self.errors[rec["key"]] = (rec["error"], rec.get("status"))
        elif kind == "done":
            self.batches[rec["id"]].status = rec["status"]
        else:
            raise KeyError(kind)

    def append(self, *records: dict) -> None:
        """Record these durably (written, flushed and fsynced once before this returns), and apply them."""
        if not records:
            return
        if self._log is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._log = AppendLog(self.path)
        self._log.append(b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records))
        self._log.sync()
        for rec in records:
            self._apply(rec)

    def pending(self) -> list[JournalBatch]:
        """Batches created and not seen to end."""
        return [b for b in self.batches.values() if b.status is None]

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
