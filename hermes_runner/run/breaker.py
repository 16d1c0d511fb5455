"""The circuit breaker: a spike of one error class pauses the dispatch of prompts until a probe succeeds.

`Breaker` is the state machine (closed, open per class, trials), fed by the model calls (a `CallHook`) and by
the prompts' outcomes; `Guard` wraps each prompt's work: it waits while the breaker is open, and runs again a
prompt that failed with an open class (its failed attempts go to failures.jsonl, the ledger gets one record).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import openai

from hermes_runner.agent.session import Failure, Outcome
from hermes_runner.config import BreakerClass, BreakerConfig, ErrorClass, ModelConfig
from hermes_runner.dataset import Prompt
from hermes_runner.errors import BrokenStream, RemoteCallError, SandboxError
from hermes_runner.model.base import CallHook, Completion
from hermes_runner.model.client import openai_client
from hermes_runner.model.retry import connection_refused
from hermes_runner.run.budget import CURRENT_PROMPT
from hermes_runner.trajectory import entry as entries
from hermes_runner.util.text import first_line

log = logging.getLogger(__name__)

MAX_RERUNS = 5  # times one prompt is run again for failing while its class is open (then its failure stays)
MIN_PROMPTS = 3  # the fewest prompts breaker.share asks for (one or two failing prompts are no spike)
PROBE_TIMEOUT_S = 60.0  # a probe call not answered within this failed
PROBED = frozenset({BreakerClass.provider})  # classes probed by a call; the others by one trial prompt

Probe = Callable[[], Awaitable[str | None]]  # None: the endpoint answers; else why not


def call_class(exc: BaseException | None) -> BreakerClass | None:
    """The class of one failed model call attempt: provider for a 5xx or a 429 answer, or a refused connection."""
    if connection_refused(exc):
        return BreakerClass.provider
    status = None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
    elif isinstance(exc, RemoteCallError | BrokenStream):
        status = getattr(exc, "status_code", None) or getattr(exc, "status", None)
    if status is not None and outage_status(status):
        return BreakerClass.provider
    return None


def outage_status(status: int | None) -> bool:
    """Whether a provider error's HTTP status can be an outage: a 5xx, a 429, or none (no answer at all); a 400
    (a context too long, a bad request) is the prompt's own."""
    return status is None or status >= 500 or status == 429


def outcome_classes(outcome: Outcome) -> set[BreakerClass]:
    """The classes a prompt's outcome shows: a provider failure, a sandbox that did not start, a scorer error."""
    found = set()
    for f in [*outcome.earlier_failures, *([outcome] if isinstance(outcome, Failure) else [])]:
        if f.error_class == ErrorClass.provider and outage_status(f.status):
            found.add(BreakerClass.provider)
        elif f.error_class == ErrorClass.sandbox and f.api_calls == 0 and f.error_type == SandboxError.__name__:
            found.add(BreakerClass.sandbox)
    if not isinstance(outcome, Failure) and any(s.get("error") for s in outcome.scores or []):
        found.add(BreakerClass.scorer)
    return found


@dataclass
class Opened:
    """One open class: since when, why, the last probe's answer."""

    since: float
    why: str
    last_probe: str = ""
    trial: str = ""  # "granted": one prompt may start as the trial; "running": it is running


@dataclass
class Breaker(CallHook):
    """Counts, per class, the distinct prompts that met its errors over the window; opens at the threshold."""

    cfg: BreakerConfig
    workers: int = 1  # num_workers: `breaker.share` of them also opens it
    clock: Callable[[], float] = time.monotonic
    opened: dict[BreakerClass, Opened] = field(default_factory=dict)
    gave_up: str | None = None  # why the run gave up waiting (breaker.give_up_s)
    on_give_up: Callable[[str], None] | None = None
    _seen: dict[BreakerClass, deque[tuple[float, str]]] = field(default_factory=dict)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    # -- fed ---------------------------------------------------------------------------------

    def after_call(self, exc: BaseException | None, completion: Completion | None) -> None:
        if completion is not None and BreakerClass.provider in self.opened:
            self.close(BreakerClass.provider, "a model call was answered")
        elif (cls := call_class(exc)) is not None:
            what = "connection refused" if connection_refused(exc) else f"HTTP {getattr(exc, 'status_code', '?')}"
            self.note(cls, CURRENT_PROMPT.get() or "?", what)

    def note(self, cls: BreakerClass, key: str, what: str) -> None:
        """A prompt met an error of class `cls`: the breaker opens when `threshold` prompts did within the window."""
        if not self.cfg.enabled or cls not in self.cfg.on:
            return
        now, seen = self.clock(), self._seen.setdefault(cls, deque())
        seen.append((now, key))
        while seen and seen[0][0] < now - self.cfg.window_s:
            seen.popleft()
        prompts = len({k for _, k in seen})
        if cls not in self.opened and prompts >= self.threshold:
            why = f"{prompts} prompts met {cls} errors within {self.cfg.window_s:g}s (the last: {what})"
            self.opened[cls] = Opened(now, why)
            log.warning("breaker open: %s; no new prompt starts, probing every %gs", why, self.cfg.probe_s)

    def judge(self, outcome: Outcome, trial: frozenset[BreakerClass]) -> set[BreakerClass]:
        """Count the classes the outcome shows; a trial prompt closes its classes it did not show."""
        found = outcome_classes(outcome)
        for cls in found:
            self.note(cls, outcome.prompt.key, getattr(outcome, "error_type", "") or f"{cls} error")
        for cls in trial:
            if (o := self.opened.get(cls)) is not None:
                if cls in found:
                    o.trial, o.last_probe = "", f"trial prompt {outcome.prompt.index} failed"
                else:
                    self.close(cls, f"trial prompt {outcome.prompt.index} ran clean")
        return found

    @property
    def threshold(self) -> int:
        """Prompts that open it: breaker.threshold, or breaker.share of num_workers if fewer (at least 3)."""
        share = max(MIN_PROMPTS, math.ceil(self.cfg.share * self.workers))
        return min(self.cfg.threshold, share)

    # -- open / close ------------------------------------------------------------------------

    def close(self, cls: BreakerClass, how: str) -> None:
        o = self.opened.pop(cls, None)
        if o is not None:
            self._seen.pop(cls, None)
            log.warning("breaker closed: %s: %s after %.0fs; prompts start again", cls, how, self.clock() - o.since)
            self._poke()

    def holds(self, classes: set[BreakerClass]) -> bool:
        """Whether a failure showing `classes` is run again (one of them is open)."""
        return self.gave_up is None and any(c in self.opened for c in classes)

    def untried(self, trial: frozenset[BreakerClass]) -> None:
        """A trial prompt ended without an outcome (cancelled): the next probe grants another."""
        for cls in trial:
            if (o := self.opened.get(cls)) is not None:
                o.trial = ""

    def _poke(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def admit(self) -> frozenset[BreakerClass] | None:
        """Wait until a prompt may start: the classes it is the trial of (empty: none); None once given up."""
        while True:
            if self.gave_up is not None:
                return None
            if not self.opened:
                return frozenset()
            if all(o.trial == "granted" for o in self.opened.values()):
                for o in self.opened.values():
                    o.trial = "running"
                return frozenset(self.opened)
            await self._changed.wait()

    # -- probing -----------------------------------------------------------------------------

    async def probing(self, probe: Probe | None) -> None:
        """While the run goes: every probe_s, probe each open class (a call, or a trial prompt granted)."""
        while True:
            await asyncio.sleep(self.cfg.probe_s)
            try:
                await self.probe_once(probe)
            except Exception:  # noqa: BLE001 - a probe's own bug must not leave the breaker open for good
                log.exception("breaker: the probe failed unexpectedly")

    async def probe_once(self, probe: Probe | None) -> None:
        if self.gave_up is not None:
            return
        for cls, o in list(self.opened.items()):
            if self.cfg.give_up_s is not None and self.clock() - o.since > self.cfg.give_up_s:
                self._give_up(cls, o)
                return
            if cls in PROBED and probe is not None:
                o.last_probe = (await probe()) or ""
                if not o.last_probe:
                    self.close(cls, "a probe call was answered")
                else:
                    log.info("breaker open: %s: the probe failed: %s", cls, o.last_probe)
            elif not o.trial:
                o.trial = "granted"
        self._poke()

    def _give_up(self, cls: BreakerClass, o: Opened) -> None:
        self.gave_up = (
            f"{cls} errors for {self.clock() - o.since:.0f}s (breaker.give_up_s={self.cfg.give_up_s:g}): {o.why}"
        )
        if self.on_give_up is not None:
            self.on_give_up(self.gave_up)
        self._poke()

    def describe(self) -> str:
        """The progress line's note: the open classes, for how long, the last probe."""
        parts = []
        for cls, o in self.opened.items():
            last = f", last probe: {o.last_probe[:60]}" if o.last_probe else ""
            parts.append(
                f"breaker open: {cls} {self.clock() - o.since:.0f}s, probing every {self.cfg.probe_s:g}s{last}"
            )
        return "; ".join(parts)


def endpoint_probe(model: ModelConfig, base_url: str | None) -> Probe:
    """A 1-token chat call to the run's endpoint: None when it is answered (any status below 500 but 429)."""

    async def probe() -> str | None:
        client = openai_client(model, base_url, pool_size=1)
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                await client.chat.completions.create(
                    model=model.name, messages=[{"role": "user", "content": "ping"}], max_tokens=1
                )
        except TimeoutError:
            return f"no answer within {PROBE_TIMEOUT_S:g}s"
        except openai.APIStatusError as exc:
            return None if exc.status_code < 500 and exc.status_code != 429 else f"HTTP {exc.status_code}"
        except Exception as exc:  # noqa: BLE001 - any other failure to get an answer: not recovered
            return "connection refused" if connection_refused(exc) else first_line(exc) or type(exc).__name__
        finally:
            await client.close()
        return None

    return probe


@dataclass
class NotStarted:
    """A prompt that never started: the breaker gave up while it waited (it stays pending)."""

    prompt: Prompt


class Guard:
    """Wraps each prompt's work: waits while the breaker is open, runs again a failure of an open class."""

    def __init__(self, breaker: Breaker, on_start: Callable[[Prompt], None], on_end: Callable[[Prompt], None]):
        self.breaker, self.on_start, self.on_end = breaker, on_start, on_end
        self.held = 0  # prompts waiting to run again
        self.rerun = 0  # runs again in all

    async def run(self, prompt: Prompt, work: Callable[[Prompt], Awaitable[Outcome]]) -> Outcome | NotStarted:
        held: list[Failure] = []
        while True:
            trial = await self.breaker.admit()
            if trial is None:
                self.held -= bool(held)
                return merged(held.pop(), held) if held else NotStarted(prompt)
            if held:
                self.held, self.rerun = self.held - 1, self.rerun + 1
            self.on_start(prompt)
            try:
                outcome = await work(prompt)
            except BaseException:
                self.breaker.untried(trial)
                raise
            finally:
                self.on_end(prompt)
            found = self.breaker.judge(outcome, trial)
            if isinstance(outcome, Failure) and len(held) < MAX_RERUNS and self.breaker.holds(found):
                log.info("prompt %d failed while the breaker is open (%s): it runs again on recovery",
                         prompt.index, outcome.error_type)  # fmt: skip
                held.append(outcome)
                self.held += 1
                continue
            return merged(outcome, held)


def merged(outcome: Outcome, held: list[Failure]) -> Outcome:
    """`outcome` with the failed runs before it as its earlier attempts (failures.jsonl) and their spend."""
    if not held:
        return outcome
    before: list[Failure] = []
    for f in held:
        before += [*f.earlier_failures, f]
        f.earlier_failures = []
        outcome.usage.add(f.usage)
        outcome.saved.add(f.saved)
        outcome.api_calls += f.api_calls
        outcome.retries += f.retries
        outcome.cache_hits += f.cache_hits
    outcome.earlier_failures = before + outcome.earlier_failures
    for i, f in enumerate(outcome.earlier_failures, 1):
        f.attempt = i
    if isinstance(outcome, Failure):
        outcome.attempt = len(outcome.earlier_failures) + 1
    elif outcome.entry:
        entries.count(outcome.entry, outcome)  # the entry's spend: every run of the prompt, as the ledger's
    return outcome
