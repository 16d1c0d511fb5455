"""Console output: one stderr console shared by log lines and the progress display."""

from __future__ import annotations

import logging
import os
import sys

from rich.console import Console
from rich.logging import RichHandler

console = Console(stderr=True)
FILE_ONLY = "file_only"  # `extra={FILE_ONLY: True}`: a log record for the log files, not the console


PIPE_WIDTH = 1000  # stdout_console's width on a pipe or file: no table is that wide


def stdout_console(**kwargs: object) -> Console:
    """A console for a command's own lines on stdout: wrapped at word boundaries to a terminal's width, whole
    lines (no wrapping) when stdout is a pipe or file, so that a log or a grep sees each line as one: a table too
    is drawn at its natural width there (rich would squeeze it into 80 columns, breaking its cells)."""
    out = Console(**kwargs)  # type: ignore[arg-type]
    out.soft_wrap = not out.is_terminal
    if not out.is_terminal and "width" not in kwargs and not os.environ.get("COLUMNS"):
        out.width = PIPE_WIDTH
    return out


def _not_file_only(record: logging.LogRecord) -> bool:
    return not getattr(record, FILE_ONLY, False)


def console_handler() -> logging.Handler:
    """Rich log lines on a terminal; plain, unwrapped lines when stderr is a pipe or file."""
    if sys.stderr.isatty():
        handler: logging.Handler = RichHandler(console=console, show_path=False, markup=False)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(asctime)s][%(levelname)s] %(message)s", "%H:%M:%S"))
    handler.addFilter(_not_file_only)  # (lines the live display already shows, e.g. the plain progress line)
    return handler


class DeferredFileHandler(logging.Handler):
    """The run's log file (run.log), opened only once the run dir is accepted (`open`): until then records
    wait in memory, so a refused run (a foreign dir, resume=false, a bad input) appends nothing to a
    directory it was pointed at. `discard` drops them (the console has shown them)."""

    MAX_WAITING = 10_000  # records kept until the file opens (start-up logs a few dozen)

    def __init__(self, filename: str, encoding: str | None = "utf-8"):
        super().__init__()
        self.filename, self.encoding = filename, encoding
        self._file: logging.FileHandler | None = None
        self._waiting: list[logging.LogRecord] | None = []

    def emit(self, record: logging.LogRecord) -> None:
        if self._file is not None:
            self._file.emit(record)
        elif self._waiting is not None and len(self._waiting) < self.MAX_WAITING:
            self._waiting.append(record)

    def open(self) -> None:
        """Open the file (appending) and write what waited."""
        if self._file is None:
            self._file = logging.FileHandler(self.filename, encoding=self.encoding)
            self._file.setFormatter(self.formatter)
            for record in self._waiting or ():
                self._file.emit(record)
            self._waiting = None

    def discard(self) -> None:
        """Drop what waited; nothing more is kept until `open`."""
        self._waiting = None

    def setFormatter(self, fmt: logging.Formatter | None) -> None:  # noqa: N802 - logging's name
        super().setFormatter(fmt)
        if self._file is not None:
            self._file.setFormatter(fmt)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        super().close()


def deferred_file_handler(filename: str) -> DeferredFileHandler:
    """The factory logging's dictConfig calls (conf/hydra/job_logging/rich.yaml)."""
    return DeferredFileHandler(filename)


def file_handlers() -> list[DeferredFileHandler]:
    """The root logger's deferred log files (one under Hydra's job logging, none in tests)."""
    return [h for h in logging.getLogger().handlers if isinstance(h, DeferredFileHandler)]
