"""The run's budget, metered at every model call (so dispatch stops as soon as it is spent)."""

from __future__ import annotations

from collections.abc import Callable

from hermes_runner.config import LimitsConfig
from hermes_runner.model import Completion
from hermes_runner.usage import Usage


class RunBudget:
    """A model-call hook: spend = what the ledger already holds + every call of this invocation."""

    def __init__(self, limits: LimitsConfig, spent_before: Usage, on_exhausted: Callable[[str], None] | None = None):
        self.limits = limits
        self.spent = Usage()
        self.spent.add(spent_before)
        self.on_exhausted = on_exhausted
        self.reason: str | None = None
        self.check()

    async def before_call(self, estimate_tokens: float = 0.0) -> None:
        return None

    def after_call(self, exc: BaseException | None, completion: Completion | None) -> None:
        if completion is not None:
            self.charge(completion.usage)

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
