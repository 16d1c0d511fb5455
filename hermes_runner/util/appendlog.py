"""An append-only JSONL file written in whole lines and fsynced on demand: the run dir's logs (rundir/store.py) and
batch mode's journal (model/batch_journal.py)."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


class AppendLog:
    """An append-only JSONL file written in whole lines; repairs a torn tail on open."""

    def __init__(self, path: Path, repair: bool = True):
        self.path = path
        if repair and path.exists():
            self._repair()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.dirty = False

    def _repair(self) -> None:
        size = self.path.stat().st_size
        if size == 0:
            return
        with self.path.open("rb+") as fp:
            fp.seek(max(0, size - 1))
            if fp.read(1) == b"\n":
                return
            # Find the last complete line and cut the torn bytes after it.
            pos = size
            while pos > 0:
                step = min(65536, pos)
                fp.seek(pos - step)
                chunk = fp.read(step)
                nl = chunk.rfind(b"\n")
                if nl >= 0:
                    pos = pos - step + nl + 1
                    break
                pos -= step
            log.warning("%s: dropping a torn last line (%d bytes) left by a crash", self.path.name, size - pos)
            fp.truncate(pos)

    def append(self, line: bytes) -> tuple[int, int]:
        """Write one whole line; return (offset, length). A failed write (e.g. a full disk) leaves no torn bytes."""
        offset = self.size
        view = memoryview(line)
        try:
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        except BaseException:
            self.truncate(offset)
            raise
        self.size += len(line)
        self.dirty = True
        return offset, len(line)

    def truncate(self, offset: int) -> None:
        """Cut the file back to `offset` (undo appends past it)."""
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, offset)
        self.size = offset

    def sync(self) -> None:
        if self.dirty:
            self.dirty = False
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            self._fd = -1
