"""A finished prompt's ledger record: the summary every outcome gets, the filters that keep or discard it, and
the `Recorder` that writes it (with its entry, or its failure) to the run directory."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from hermes_runner.agent.loop import SessionResult
from hermes_runner.agent.session import Failure, Outcome
from hermes_runner.config import AtLimit, FiltersConfig, HallucinatedToolPolicy, ScorerConfig
from hermes_runner.errors import ENDPOINT_DOWN_ERRORS
from hermes_runner.rundir.manifest import now
from hermes_runner.rundir.stats import RunStats
from hermes_runner.rundir.store import LedgerState, Ref, RunStore, dumps_line
from hermes_runner.scorers import unscored
from hermes_runner.trajectory import entry as entries
from hermes_runner.trajectory.entry import NOT_SCORED
from hermes_runner.trajectory.tokens import drift
from hermes_runner.util.redact import Redactor

log = logging.getLogger(__name__)


def _summary(res: SessionResult | Failure, key: str, index: int, invocation: int) -> dict:
    p = res.prompt
    rec = {
        "key": key,
        "index": index,
        **({"row": p.row_key, "sample": p.sample} if p.sample else {}),  # one of samples_per_prompt > 1
        "inv": invocation,
        "ts": now(),
        "api_calls": res.api_calls,
        "retries": res.retries,
        "duration_s": round(res.duration_s, 3),
        "toolsets": res.toolsets,
        "usage": res.usage.as_dict(),
    }
    if res.cache_hits:  # calls the response cache answered: not in api_calls or usage (nothing was spent)
        rec.update(cache_hits=res.cache_hits, saved=res.saved.as_dict())
    if res.earlier_failures:
        rec["attempts"] = len(res.earlier_failures) + 1  # in-run attempts (retry.max_attempts)
    return rec


def classify(res: SessionResult, filters: FiltersConfig, names: list[str]) -> tuple[str, str | None, dict]:
    """Apply the filters: (status, discard reason, stats summary)."""
    turns, with_r = entries.reasoning_turns(res)
    known = set(names)
    if res.external:  # an external program's calls: to the tools it offered itself
        known = {(t.openai_schema().get("function") or {}).get("name") for t in res.tools}
    unknown = Counter(n for n, _ in res.tool_calls if n not in known)
    tools: dict[str, list[int]] = {}
    for name, ok in res.tool_calls:
        if name in unknown:
            continue
        t = tools.setdefault(name, [0, 0])
        t[0] += 1
        t[1] += not ok
    summary = {
        "completed": res.completed, "partial": res.partial, "stop": res.stop_reason,
        "turns": turns, "reasoning_turns": with_r, "tools": tools, "unknown_tools": dict(unknown),
    }  # fmt: skip
    if filters.require_reasoning and with_r == 0:
        return "discarded", "no_reasoning", summary
    if unknown and filters.hallucinated_tools == HallucinatedToolPolicy.drop:
        return "discarded", "hallucinated_tool", summary
    if filters.min_reward is not None and res.reward < filters.min_reward:
        return "discarded", "low_reward", summary
    return "ok", None, summary


LEDGER_SCORE_KEYS = ("name", "kind", "value", "passed", "error")  # what the ledger keeps of each score record


def ledger_scores(scores: list[dict]) -> list[dict]:
    """The score records as the ledger keeps them (the entry has the rest: explanation, output, details); records
    that stand for no judgment ("not scored") are left out, so statistics count real scores only."""
    return [{k: s[k] for k in LEDGER_SCORE_KEYS} for s in scores if s.get("error") != NOT_SCORED]


@dataclass
class Recorder:
    """Writes each finished prompt of an invocation to the run dir: its failed attempts, then its entry and ledger
    record (or its failure); closes a batch file once its last prompt is in."""

    store: RunStore
    state: LedgerState
    stats: RunStats
    plan_index: dict[str, int]  # recorded key -> its index in the current dataset
    redact: Redactor
    invocation: int
    filters: FiltersConfig
    scorers: dict[str, ScorerConfig]
    names: list[str]  # the registered tools
    model_name: str  # model.name: the record's model when the replies name none
    batch_size: int
    first_batch: int  # this invocation's first batch
    to_run: int  # this invocation's prompts
    on_endpoint_down: Callable[[str], None]
    verbose: bool = False
    at_limit: AtLimit = AtLimit.scored  # limits.at_limit: how a prompt stopped by a limit counts in pass@k
    batch_left: dict[int, int] = field(default_factory=dict)  # open batches: prompts still to record

    def record(self, outcome: Outcome, batch: int) -> str:
        """Write the outcome; its status (ok, discarded, failed)."""
        p = outcome.prompt
        self._attempts(outcome, batch)
        rec = _summary(outcome, p.key, p.index, self.invocation)
        rec["batch"] = batch
        if p.digest:
            rec["digest"] = p.digest  # a row with an id: a later edit of it is told (plan.make_plan)
        if outcome.timeline:
            self.store.write_timeline({"key": p.key, "inv": self.invocation, "calls": outcome.timeline})
        if isinstance(outcome, SessionResult) and outcome.tokens:
            self._tokens(outcome)
        status = self._failed(outcome, rec) if isinstance(outcome, Failure) else self._finished(outcome, rec)
        self.plan_index[p.key] = p.index
        self.stats.add(rec)
        self.state.attempts.add((p.key, self.invocation))
        left = self.batch_left[batch] = self.batch_left.get(batch, self._batch_total(batch)) - 1
        if left <= 0:
            del self.batch_left[batch]
            self.store.close_batch(batch)
        return status

    def _failed(self, outcome: Failure, rec: dict) -> str:
        p, error = outcome.prompt, self.redact.text(outcome.error)
        if outcome.error_type in ENDPOINT_DOWN_ERRORS:
            self.on_endpoint_down(error)
        else:
            log.warning("prompt %d failed: %s: %s", p.index, outcome.error_type, error)
        rec.update(error_type=outcome.error_type, error=error)
        if outcome.attempt > 1:
            rec["attempt"] = outcome.attempt  # the last of its in-run attempts
        self.store.write_failure(rec, {"traceback": self.redact.text(outcome.traceback), "prompt": p.prompt[:2000]})
        self.state.failed[p.key] = rec
        return "failed"

    def _finished(self, outcome: SessionResult, rec: dict) -> str:
        p, entry = outcome.prompt, outcome.entry  # (built by the session)
        if self.scorers and not outcome.scores:
            outcome.scores = entry["scores"] = unscored(self.scorers)  # e.g. a worker of an older version
        status, reason, summary = classify(outcome, self.filters, self.names)
        rec.update(summary, model=outcome.model or self.model_name)
        if self.scorers:
            rec.update(reward=outcome.reward, scores=ledger_scores(outcome.scores))
        if outcome.at_limit:  # answered at a limit (`stop` names it): how it counts, as configured when recorded
            rec["at_limit"] = self.at_limit.value
        if reason:
            rec["reason"] = reason
        batch = rec["batch"]
        entry["metadata"]["batch_num"], entry["discard_reason"] = batch, reason or ""
        self.store.write_trajectory(status, batch, dumps_line(entry), rec)
        self.state.terminal[p.key] = Ref(
            status, rec["file"], rec["offset"], rec["length"], p.index, batch, p.digest, p.sample
        )  # fmt: skip
        self.state.failed.pop(p.key, None)
        if self.verbose:
            log.info("prompt %d %s%s", p.index, status, f" ({reason})" if reason else "")
        return status

    def _tokens(self, outcome: SessionResult) -> None:
        """The turns' token ids to the tokens/ sidecar, with the turns that drift (trajectory/tokens.py)."""
        p = outcome.prompt
        drifted = drift(outcome.tokens)
        if drifted:
            log.info("prompt %d: the prompt tokens of turn(s) %s do not extend the turn before", p.index, drifted)
        self.store.write_tokens({"key": p.key, "inv": self.invocation, "turns": outcome.tokens, "drift": drifted})

    def _attempts(self, outcome: Outcome, batch: int) -> None:
        """The failed in-run attempts before the outcome: each in failures.jsonl (retry.max_attempts)."""
        p = outcome.prompt
        for f in outcome.earlier_failures:
            error = self.redact.text(f.error)
            log.warning("prompt %d attempt %d failed (retrying): %s: %s", p.index, f.attempt, f.error_type, error)
            rec = _summary(f, p.key, p.index, self.invocation)
            rec.update(batch=batch, attempt=f.attempt, error_type=f.error_type, error=error)
            self.store.write_attempt({**rec, "traceback": self.redact.text(f.traceback), "prompt": p.prompt[:2000]})

    def _batch_total(self, batch: int) -> int:
        """How many of this invocation's prompts go to `batch` (all full but the last)."""
        return min(self.batch_size, self.to_run - (batch - self.first_batch) * self.batch_size)
