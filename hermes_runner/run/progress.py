"""Live progress display (rich)."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from hermes_runner.usage import Usage
from hermes_runner.util.console import console as default_console


class RunProgress:
    def __init__(
        self,
        run_name: str,
        total: int,
        enabled: bool = True,
        console: Console | None = None,
        status: Callable[[], str] | None = None,
    ):
        self.enabled = enabled
        self.total = total
        self.status = status  # extra live status (retries, throttling)
        self.started = time.monotonic()
        self.ok = self.discarded = self.failed = 0
        self.usage = Usage()
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console or default_console,
            disable=not enabled,
            refresh_per_second=4,
        )
        self._task = self._progress.add_task(run_name, total=total, counts=self._counts(0))

    def _counts(self, in_flight: int) -> str:
        done = self.ok + self.discarded + self.failed
        rate = self.usage.total_tokens / max(1e-9, time.monotonic() - self.started)
        text = (
            f"[green]ok {self.ok}[/] [yellow]discarded {self.discarded}[/] [red]failed {self.failed}[/] "
            f"in flight {in_flight} | {self.usage.total_tokens:,} tok ({rate:,.0f}/s)"
        )
        if self.usage.cost_usd:
            projected = self.usage.cost_usd / done * self.total if done else 0.0
            text += f" ${self.usage.cost_usd:.4f} (projected ${projected:.4f})"
        extra = self.status() if self.status else ""
        return text + (f" [magenta]{extra}[/]" if extra else "")

    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def advance(self, status: str, usage: Usage, in_flight: int) -> None:
        if status == "ok":
            self.ok += 1
        elif status == "discarded":
            self.discarded += 1
        else:
            self.failed += 1
        self.usage.add(usage)
        self._progress.update(self._task, advance=1, counts=self._counts(in_flight))

    def refresh(self, in_flight: int) -> None:
        self._progress.update(self._task, counts=self._counts(in_flight))
