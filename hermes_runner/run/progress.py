"""Run progress: a two-row live display on a terminal, plain periodic lines in logs.

Row 1 is the bar, M/N, elapsed and ETA (they always fit: the run name gives way first); row 2 is the
counts, tokens, cost, response-cache hits and what they saved, retries and throttling (its tail is cut at the terminal's width). When stderr is not
a terminal (nohup, SLURM `.out`, a file) a plain line is logged every `interval_s` seconds or every
`every_percent` of the prompts, whichever comes first; the same lines go to `run.log` on a terminal too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from hermes_runner.model.ratelimit import Throttle
from hermes_runner.usage import Usage
from hermes_runner.util.console import FILE_ONLY
from hermes_runner.util.console import console as default_console

log = logging.getLogger(__name__)

NAME_CHARS = 24  # the run name on row 1 is shortened to this (middle cut, both ends kept)


def short_name(name: str, width: int = NAME_CHARS) -> str:
    """`name` in at most `width` characters, its start and end kept: `sweep-qwen3…-seed1`."""
    if len(name) <= width:
        return name
    tail = (width - 1) // 3
    return f"{name[: width - 1 - tail]}…{name[len(name) - tail :]}"


def clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class _TwoRows(Progress):
    """rich Progress whose task row is followed by a status row (cut, never wrapped)."""

    def __init__(self, *columns, status: Callable[[], Text], **kwargs):
        self._status = status  # (before rich's __init__, which may render)
        super().__init__(*columns, **kwargs)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        yield self._status()


class RunProgress:
    def __init__(
        self,
        run_name: str,
        total: int,
        enabled: bool = True,
        console: Console | None = None,
        throttle: Callable[[], Throttle] | None = None,
        interval_s: float = 30.0,
        every_percent: float = 5.0,
        min_gap_s: float = 1.0,
        notes: Callable[[], str] | None = None,
    ):
        self.console = console or default_console
        self.live = enabled and self.console.is_terminal  # the live rows; plain lines otherwise
        self.name = run_name
        self.total = total
        self.throttle = throttle or Throttle
        self.notes = notes  # what the run says of itself: the circuit breaker open, sessions gone silent
        self.interval_s, self.every_percent = interval_s, every_percent
        self.min_gap_s = min_gap_s  # (a short run does not log a line per prompt: percent lines wait this long)
        self.started = time.monotonic()
        self.ok = self.discarded = self.failed = 0
        self.in_flight = 0
        self.outcome_retries = 0  # retries the finished prompts reported
        self.usage = Usage()
        self.cache_hits = 0  # calls of the finished prompts the response cache answered
        self.saved = Usage()  # their usage
        self._last_line = self.started
        self._last_done = 0
        self._last_events = (0, 0, 0)  # retries, 429s, concurrency at the last event summary
        self._progress = _TwoRows(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=None),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            status=self.status_row,
            console=self.console,
            disable=not self.live,
            refresh_per_second=4,
            expand=True,
        )
        self._task = self._progress.add_task(short_name(run_name), total=total)

    @property
    def done(self) -> int:
        return self.ok + self.discarded + self.failed

    # -- what is shown ---------------------------------------------------------------------

    def counts(self) -> str:
        """Row 2 (and the tail of the plain line): counts, tokens, cost, retries, throttling."""
        elapsed = max(1e-9, time.monotonic() - self.started)
        text = f"ok {self.ok} discarded {self.discarded} failed {self.failed} in flight {self.in_flight}"
        if self.notes is not None and (note := self.notes()):
            text += f" | {note}"
        text += f" | {self.usage.total_tokens:,} tok ({self.usage.total_tokens / elapsed:,.0f}/s)"
        if self.usage.cost_usd:
            projected = self.usage.cost_usd / self.done * self.total if self.done else 0.0
            text += f" ${self.usage.cost_usd:.4f} (projected ${projected:.4f})"
        if self.cache_hits:
            text += f" | cache {self.cache_hits:,} hits, {self.saved.total_tokens:,} tok"
            text += f" ${self.saved.cost_usd:.4f} saved" if self.saved.cost_usd else " saved"
        extra = self.endpoint().describe()
        return text + (f" | {extra}" if extra else "")

    def status_row(self) -> Text:
        text = Text(self.counts(), no_wrap=True, overflow="ellipsis")
        text.highlight_words(["ok"], "green")
        for word, style in (("discarded", "yellow"), ("failed", "red")):
            text.highlight_regex(rf"{word} \d+", style)
        text.highlight_regex(r"(breaker open: \S+|\d+ silent)", "bold red")
        text.highlight_regex(r"(retries|429s|backing off|throttled|concurrency) [\d./s]+", "magenta")
        return text

    def eta(self) -> float | None:
        if not self.done:
            return None
        rate = self.done / max(1e-9, time.monotonic() - self.started)
        return (self.total - self.done) / rate

    def line(self) -> str:
        """The plain progress line: `name: 40/200 (20%) elapsed 0:01:10 ETA 0:04:40 | ok 38 ...`."""
        pct = 100.0 * self.done / self.total if self.total else 100.0
        elapsed = time.monotonic() - self.started
        return (
            f"{self.name}: {self.done}/{self.total} ({pct:.0f}%) elapsed {clock(elapsed)} ETA {clock(self.eta())}"
            f" | {self.counts()}"
        )

    # -- updates ----------------------------------------------------------------------------

    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()
        if self.done != self._last_done:
            self._emit()  # the last line: where the run ended

    def endpoint(self) -> Throttle:
        """The limiter's view, with at least the retries the finished prompts reported (a limiter in
        another process, e.g. Ray actors', is not seen here)."""
        t = self.throttle()
        return replace(t, retries=self.outcome_retries) if t.retries < self.outcome_retries else t

    def advance(
        self,
        status: str,
        usage: Usage,
        in_flight: int,
        retries: int = 0,
        cache_hits: int = 0,
        saved: Usage | None = None,
    ) -> None:
        if status == "ok":
            self.ok += 1
        elif status == "discarded":
            self.discarded += 1
        else:
            self.failed += 1
        self.usage.add(usage)
        self.cache_hits += cache_hits
        if saved is not None:
            self.saved.add(saved)
        self.outcome_retries += retries
        self.in_flight = in_flight
        self._progress.update(self._task, advance=1)
        self.tick()

    def refresh(self, in_flight: int) -> None:
        self.in_flight = in_flight
        self._progress.refresh()
        self.tick()

    def tick(self) -> None:
        """Log the plain line when its interval or its share of prompts has passed; and, as one INFO line,
        the retries and concurrency changes since the last one (each event is logged at DEBUG)."""
        now = time.monotonic()
        step = max(1, int(self.total * self.every_percent / 100.0)) if self.every_percent else 0
        due_by_time = now - self._last_line >= self.interval_s and self.done != self._last_done
        due_by_count = step and self.done - self._last_done >= step and now - self._last_line >= self.min_gap_s
        if due_by_time or due_by_count or (self.done == self.total and self.done != self._last_done):
            self._emit()

    def _emit(self) -> None:
        self._last_line, self._last_done = time.monotonic(), self.done
        extra = {} if not self.live else {FILE_ONLY: True}  # on a terminal the rows show it; run.log gets it
        log.info("%s", self.line(), extra=extra)
        t = self.endpoint()
        retries, limited, conc = self._last_events
        if (t.retries, t.rate_limited, t.concurrency) != (retries, limited, conc or t.max_concurrency):
            log.info(
                "model calls since the last line: %d retries, %d 429s; concurrency %d/%d; %.1fs backing off in all",
                t.retries - retries, t.rate_limited - limited, t.concurrency, t.max_concurrency, t.backoff_s,
                extra=extra,
            )  # fmt: skip
        self._last_events = (t.retries, t.rate_limited, t.concurrency)
