"""The run's budget, metered at every model call (so dispatch stops as soon as it is spent).

Every call is also recorded as it starts and as it ends (`record`, the run's `usage.jsonl`), so the spend
of prompts that never reach the ledger (cancelled by Ctrl-C, or the runner killed) still counts on resume.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import ContextVar

from hermes_runner.config import LimitsConfig
from hermes_runner.model.base import CallHook, Completion
from hermes_runner.usage import Usage

# The key of the prompt whose session is running (set in each session's task).
CURRENT_PROMPT: ContextVar[str | None] = ContextVar("hermes_current_prompt", default=None)


class RunBudget(CallHook):
    """A model-call hook: spend = what the run recorded before + every call of this invocation.

    It meters the run's model; `tools` is the same meter for the tools' models (vision, MoA).
    """

    def __init__(
        self,
        limits: LimitsConfig,
        spent_before: Usage,
        on_exhausted: Callable[[str], None] | None = None,
        record: Callable[[dict], None] | None = None,
        invocation: int = -1,
    ):
        self.limits = limits
        self.spent = Usage()
        self.spent.add(spent_before)
        self.on_exhausted = on_exhausted
        self.record = record
        self.invocation = invocation
        self.reason: str | None = None
        self.tools = _ToolMeter(self)
        self.check()

    def event(self, model: str, event: str, **extra: object) -> None:
        if self.record is not None:
            self.record({"key": CURRENT_PROMPT.get(), "inv": self.invocation, "model": model, "event": event, **extra})

    async def before_call(self, estimate_tokens: float = 0.0) -> None:
        self.event("main", "start")

    def after_call(self, exc: BaseException | None, completion: Completion | None, model: str = "main") -> None:
        if completion is not None:
            self.event(model, "end", usage=completion.usage.as_dict())
            self.charge(completion.usage)
        elif exc is not None and not isinstance(exc, asyncio.CancelledError):
            self.event(model, "error", error=getattr(exc, "error_type", None) or type(exc).__name__)

    def charge(self, usage: Usage) -> None:
        """Count spend metered elsewhere (e.g. a whole prompt's usage from a remote worker)."""
        self.spent.add(usage)
        self.check()

    def check(self) -> str | None:
        if self.reason:
            return self.reason
        lim, s = self.limits, self.spent
        if lim.max_cost_usd is not None and s.cost_usd >= lim.max_cost_usd:
            self.reason = f"limits.max_cost_usd={lim.max_cost_usd:g} reached (${s.cost_usd:.4f} spent)"
        elif lim.max_tokens_total is not None and s.total_tokens >= lim.max_tokens_total:
            self.reason = f"limits.max_tokens_total={lim.max_tokens_total} reached ({s.total_tokens:,} tokens)"
        if self.reason and self.on_exhausted:
            self.on_exhausted(self.reason)
        return self.reason


class _ToolMeter(CallHook):
    """The budget's hook for the tools' models: the same spend, recorded as `tool` calls."""

    def __init__(self, budget: RunBudget):
        self.budget = budget

    async def before_call(self, estimate_tokens: float = 0.0) -> None:
        self.budget.event("tool", "start")

    def after_call(self, exc: BaseException | None, completion: Completion | None) -> None:
        self.budget.after_call(exc, completion, model="tool")
