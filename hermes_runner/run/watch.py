"""Silently dead sessions: a prompt with no model call starting or ending for `breaker.silent_after_s` is
reported live (a log warning, the progress line) with where it waits: the model call in flight, the tool and its
command, or the innermost line of the runner's code its task is suspended at."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from hermes_runner.dataset import Prompt
from hermes_runner.model.base import CallHook, Completion
from hermes_runner.run.budget import CURRENT_PROMPT
from hermes_runner.util.stacks import await_frames
from hermes_runner.util.text import clip

log = logging.getLogger(__name__)

PACKAGE = "hermes_runner"


@dataclass
class Live:
    """One running prompt: its task, when it was last heard of, its model calls in flight."""

    prompt: Prompt
    task: asyncio.Task | None
    last: float
    calls: int = 0
    warned: float = 0.0  # the `last` it was reported silent at (reported once per silence)


class SessionWatch(CallHook):
    """Hears every model call of the run's sessions (by CURRENT_PROMPT) and finds those gone silent."""

    def __init__(self, silent_after_s: float | None, clock: Callable[[], float] = time.monotonic):
        self.silent_after_s, self.clock = silent_after_s, clock
        self.live: dict[str, Live] = {}

    def started(self, prompt: Prompt) -> None:
        task = asyncio.current_task()
        self.live[prompt.key] = Live(prompt, task, self.clock())

    def ended(self, prompt: Prompt) -> None:
        self.live.pop(prompt.key, None)

    async def before_call(self, estimate_tokens: float = 0.0) -> None:
        if (s := self.live.get(CURRENT_PROMPT.get() or "")) is not None:
            s.last, s.calls = self.clock(), s.calls + 1

    def after_call(self, exc: BaseException | None, completion: Completion | None) -> None:
        if (s := self.live.get(CURRENT_PROMPT.get() or "")) is not None:
            s.last, s.calls = self.clock(), max(0, s.calls - 1)

    def silent(self) -> list[tuple[Live, float]]:
        """The sessions silent longer than silent_after_s, with how long, the longest first."""
        if self.silent_after_s is None:
            return []
        now = self.clock()
        found = [(s, now - s.last) for s in self.live.values() if now - s.last >= self.silent_after_s]
        return sorted(found, key=lambda x: -x[1])

    def check(self) -> str:
        """Warn once of each session newly gone silent; the progress line's note (empty: none is)."""
        found = self.silent()
        for s, idle in found:
            if s.warned != s.last:
                s.warned = s.last
                log.warning("prompt %d (%s) silent for %.0fs: %s", s.prompt.index, s.prompt.key, idle, where(s))
        if not found:
            return ""
        s, idle = found[0]
        return f"{len(found)} silent (prompt {s.prompt.index} {idle:.0f}s: {clip(where(s), 80)})"


def where(s: Live) -> str:
    """Where a session waits: its model call in flight, the tool it runs (and the command), or a line of code."""
    if s.calls:
        return f"waiting on a model call ({s.calls} in flight)"
    chain = await_frames(s.task.get_coro()) if s.task is not None else []
    for frame in chain:
        if frame.f_code.co_name == "_run_tool" and isinstance(call := frame.f_locals.get("call"), dict):
            fn = call.get("function") or {}
            return f"in tool {fn.get('name')} {clip(str(fn.get('arguments') or ''), 160)}"
    ours = [f for f in chain if PACKAGE in f.f_code.co_filename]
    if not ours:
        return "not started" if not chain else "waiting outside the runner's code"
    f = ours[-1]
    path = f.f_code.co_filename
    return f"at {path[path.rfind(PACKAGE) :]}:{f.f_lineno} in {f.f_code.co_name}"
