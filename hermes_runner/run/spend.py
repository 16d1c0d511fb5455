"""What the run's model calls cost: every call into usage.jsonl as it happens, and the spend of prompts that never
reached the ledger (cancelled, or the runner killed) counted until they do."""

from __future__ import annotations

from hermes_runner.rundir.store import CallLog, RunStore
from hermes_runner.usage import Usage


class Spend:
    """The run's calls (`calls`: usage.jsonl) and this invocation's calls of prompts not yet recorded."""

    def __init__(self, store: RunStore):
        self.store = store
        self.calls = CallLog()
        self._pending: dict[str | None, CallLog] = {}  # prompt key -> its calls

    def total(self, recorded: Usage) -> Usage:
        """The ledger's spend (`recorded`) and that of the calls of prompts never recorded."""
        total = Usage()
        total.add(recorded)
        total.add(Usage.from_dict(self.now().unrecorded_usage))
        return total

    def now(self) -> CallLog:
        """`calls` with this invocation's calls of prompts still unrecorded added."""
        if not self._pending:
            return self.calls
        out = CallLog(**{**self.calls.__dict__, "unrecorded_usage": dict(self.calls.unrecorded_usage)})
        for calls in self._pending.values():
            out.unrecorded_api_calls += calls.unrecorded_api_calls
            out.unrecorded_errors += calls.unrecorded_errors
            for name, value in calls.unrecorded_usage.items():
                out.unrecorded_usage[name] = out.unrecorded_usage.get(name, 0) + value
        return out

    def record(self, rec: dict) -> None:
        """A model call started or ended: into usage.jsonl (OSError when it cannot be written)."""
        self.store.write_usage(rec)
        self.calls.add(rec, recorded=True)  # totals; the spend counts once its prompt is recorded, or at the end
        calls = self._pending.get(rec["key"])
        if calls is None:
            calls = self._pending[rec["key"]] = CallLog()
        calls.add(rec, recorded=False)

    def settled(self, key: str) -> None:
        """The prompt is recorded: its spend is in its record now."""
        self._pending.pop(key, None)
