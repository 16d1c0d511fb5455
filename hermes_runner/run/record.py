"""A finished prompt's ledger record: the summary every outcome gets, and the filters that keep or discard it."""

from __future__ import annotations

from collections import Counter

from hermes_runner.agent.loop import SessionResult
from hermes_runner.agent.session import Failure
from hermes_runner.config import HallucinatedToolPolicy
from hermes_runner.config.root import RunConfig
from hermes_runner.rundir.manifest import now
from hermes_runner.trajectory import entry as entries
from hermes_runner.trajectory.entry import NOT_SCORED


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


def classify(res: SessionResult, cfg: RunConfig, names: list[str]) -> tuple[str, str | None, dict]:
    """Apply the filters: (status, discard reason, stats summary)."""
    turns, with_r = entries.reasoning_turns(res)
    unknown = Counter(n for n, _ in res.tool_calls if n not in set(names))
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
    if cfg.filters.require_reasoning and with_r == 0:
        return "discarded", "no_reasoning", summary
    if unknown and cfg.filters.hallucinated_tools == HallucinatedToolPolicy.drop:
        return "discarded", "hallucinated_tool", summary
    if cfg.filters.min_reward is not None and res.reward < cfg.filters.min_reward:
        return "discarded", "low_reward", summary
    return "ok", None, summary


LEDGER_SCORE_KEYS = ("name", "kind", "value", "passed", "error")  # what the ledger keeps of each score record


def ledger_scores(scores: list[dict]) -> list[dict]:
    """The score records as the ledger keeps them (the entry has the rest: explanation, output, details); records
    that stand for no judgment ("not scored") are left out, so statistics count real scores only."""
    return [{k: s[k] for k in LEDGER_SCORE_KEYS} for s in scores if s.get("error") != NOT_SCORED]
