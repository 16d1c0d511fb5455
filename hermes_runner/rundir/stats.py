"""Run statistics, accumulated from ledger records (so they cover the whole run)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields

from hermes_runner.rundir.metrics import RowTally, estimate
from hermes_runner.usage import Usage

USAGE_FIELDS = tuple(f.name for f in fields(Usage))


def _rate(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


@dataclass
class ScoreTally:
    """The `scores` of finished prompts (kept and discarded), per scorer and row: overall, per toolset, per model.

    Discarded prompts count too: a sample dropped for a low reward is a failed attempt, not a missing one.
    Failed prompts carry no scores and are left out (`unscored` counts finished prompts without any). A prompt
    stopped by a limit counts as its record's `at_limit` says (limits.at_limit): as scored, as failed, or not at all."""

    scorers: list[str] = field(default_factory=list)  # in the order the records list them
    # (scope, group) -> scorer -> row key -> tally; scope is "overall" (group ""), "toolset" or "model"
    groups: dict[tuple[str, str], dict[str, dict[str, RowTally]]] = field(default_factory=dict)
    unscored: int = 0
    model_usage: dict[str, Usage] = field(default_factory=dict)  # model -> spend of its finished prompts

    def add(self, rec: dict, n: int = 1) -> None:
        scores = rec.get("scores")
        if not scores:
            self.unscored += n
            return
        counted = rec.get("at_limit")
        if counted == "drop":
            return
        if counted == "fail":
            scores = [{**s, "value": 0.0, "passed": False} for s in scores]
        row = rec.get("row") or rec["key"]
        model = rec.get("model") or ""
        spend = self.model_usage.get(model)
        if spend is None:
            spend = self.model_usage[model] = Usage()
        for name in USAGE_FIELDS:
            setattr(spend, name, getattr(spend, name) + n * (rec.get("usage") or {}).get(name, 0))
        scopes = [("overall", ""), ("model", model), *(("toolset", t) for t in rec.get("toolsets") or ())]
        for score in scores:
            name = score["name"]
            if name not in self.scorers:
                self.scorers.append(name)
            for scope in scopes:
                per_row = self.groups.setdefault(scope, {}).setdefault(name, {})
                tally = per_row.get(row)
                if tally is None:
                    tally = per_row[row] = RowTally()
                tally.add(score.get("value", 0.0), score.get("passed", False), n)

    def merge(self, other: ScoreTally) -> None:
        """Add another shard's tallies (shards hold different rows)."""
        self.scorers += [n for n in other.scorers if n not in self.scorers]
        self.unscored += other.unscored
        for scope, per_scorer in other.groups.items():
            for name, rows in per_scorer.items():
                self.groups.setdefault(scope, {}).setdefault(name, {}).update(rows)
        for model, usage in other.model_usage.items():
            self.model_usage.setdefault(model, Usage()).add(usage)

    def samples_per_row(self) -> int:
        """The most samples any row has for any scorer (the run's k once it is done)."""
        overall = self.groups.get(("overall", ""), {})
        return max((t.n for per_row in overall.values() for t in per_row.values()), default=0)

    def summary(self, k: int, default_model: str = "") -> dict | None:
        """statistics.json `scores`: per scorer mean, pass@1, pass@k and pass^k with standard errors, and both for
        every k (`by_k`) (None: nothing scored)."""
        if not self.scorers:
            return None

        def of(scope: tuple[str, str]) -> dict:
            per_scorer = self.groups.get(scope, {})
            return {name: estimate(per_scorer[name].values(), k) for name in self.scorers if name in per_scorer}

        def scoped(kind: str) -> dict:
            return {group or default_model: of((s, group)) for s, group in sorted(self.groups) if s == kind}

        return {
            "scorers": list(self.scorers),
            "k": k,
            "unscored": self.unscored,
            "overall": of(("overall", "")),
            "by_toolset": scoped("toolset"),
            "by_model": scoped("model"),
        }

    def results(self, k: int, default_model: str) -> list[dict]:
        """The evaluation table: one row per model and scorer (n, pass@1 ± stderr, pass@k, pass^k and both for every
        k, tokens, cost)."""
        out = []
        for (scope, model), per_scorer in sorted(self.groups.items()):
            if scope != "model":
                continue
            spend = self.model_usage.get(model, Usage())
            for name in self.scorers:
                if name not in per_scorer:
                    continue
                e = estimate(per_scorer[name].values(), k)
                out.append(
                    {
                        "model": model or default_model,
                        "scorer": name,
                        "n": e["samples"],
                        "rows": e["rows"],
                        "mean": e["mean"],
                        "pass_at_1": e["pass_at_1"],
                        "pass_at_1_se": e["pass_at_1_se"],
                        "k": k,
                        "pass_at_k": e["pass_at_k"],
                        "pass_at_k_se": e["pass_at_k_se"],
                        "pass_hat_k": e["pass_hat_k"],
                        "pass_hat_k_se": e["pass_hat_k_se"],
                        "by_k": e["by_k"],
                        "tokens": spend.total_tokens,
                        "cost_usd": round(spend.cost_usd, 6),
                    }
                )
        return out


@dataclass
class RunStats:
    ok: int = 0
    completed: int = 0
    partial: int = 0
    stopped: int = 0  # kept, neither completed nor partial (e.g. max_turns)
    stop_reasons: Counter = field(default_factory=Counter)  # kept: stop reason -> prompts
    stopped_reasons: Counter = field(default_factory=Counter)  # the stopped ones among them (e.g. max_turns)
    at_limit: Counter = field(
        default_factory=Counter
    )  # finished (kept or discarded) at a limit: stop reason -> prompts
    at_limit_counted: Counter = field(default_factory=Counter)  # the same by how pass@k counted them (limits.at_limit)
    discarded: Counter = field(default_factory=Counter)
    failed: Counter = field(default_factory=Counter)  # error type -> still-failed prompts (set at the end)
    tools: dict[str, list[int]] = field(default_factory=dict)  # kept: name -> [count, failures]
    unknown_tools: Counter = field(default_factory=Counter)
    turns: int = 0  # assistant turns, all trajectories (kept and discarded)
    reasoning_turns: int = 0
    kept_turns: int = 0
    kept_reasoning_turns: int = 0
    toolsets_sampled: Counter = field(default_factory=Counter)
    usage: Usage = field(default_factory=Usage)  # every call, failed prompts included
    api_calls: int = 0
    retries: int = 0
    cache_hits: int = 0  # calls the response cache answered (not in api_calls)
    saved: Usage = field(default_factory=Usage)  # their usage: what they would have cost
    prompt_seconds: float = 0.0
    batches: dict[int, Counter] = field(default_factory=dict)
    # Prompts finished earlier that are not in the current dataset (rows edited or removed): status -> count.
    out_of_scope: Counter = field(default_factory=Counter)
    scores: ScoreTally = field(default_factory=ScoreTally)  # the scorers' values of finished prompts

    def add(self, rec: dict) -> None:
        """Count one ledger record; every attempt's spend counts, outcomes only once per prompt."""
        self.add_spend(rec)
        self._outcome(rec, 1)

    def exclude(self, rec: dict) -> None:
        """Take back the outcome of a record `add` counted whose prompt is not in the current dataset (its
        spend stays: it was paid)."""
        self._outcome(rec, -1)
        if rec["status"] not in ("failed", "rescored"):
            self.out_of_scope[rec["status"]] += 1

    def add_spend(self, rec: dict) -> None:
        usage = rec.get("usage")
        if usage:  # field by field: this runs once per ledger record on every resume
            total = self.usage
            for name in USAGE_FIELDS:
                if value := usage.get(name):
                    setattr(total, name, getattr(total, name) + value)
        self.api_calls += rec.get("api_calls", 0)
        self.retries += rec.get("retries", 0)
        if hits := rec.get("cache_hits"):
            self.cache_hits += hits
            self.saved.add(Usage.from_dict(rec.get("saved")))
        self.prompt_seconds += rec.get("duration_s", 0.0)

    def _outcome(self, rec: dict, n: int) -> None:
        status = rec["status"]
        if status == "rescored":  # new scores of a prompt counted already: its old ones out, the new ones in
            self.scores.add({**rec, "scores": rec.get("prev_scores") or [], "usage": {}}, -n)
            self.scores.add({**rec, "usage": {}}, n)
            return
        batch = rec.get("batch", -1)
        per_batch = self.batches.get(batch)
        if per_batch is None:
            per_batch = self.batches[batch] = Counter()
        per_batch[status] += n
        if status == "failed":
            return  # failures are counted from the latest failure of each still-failed prompt
        self.scores.add(rec, n)
        if counted := rec.get("at_limit"):
            self.at_limit[rec.get("stop") or "unknown"] += n
            self.at_limit_counted[counted] += n
        turns, reasoning_turns = rec.get("turns", 0) * n, rec.get("reasoning_turns", 0) * n
        self.turns += turns
        self.reasoning_turns += reasoning_turns
        for toolset in rec.get("toolsets") or ():
            self.toolsets_sampled[toolset] += n
        for name, calls in (rec.get("unknown_tools") or {}).items():
            self.unknown_tools[name] += calls * n
        if status == "discarded":
            self.discarded[rec.get("reason", "unknown")] += n
            return
        self.ok += n
        completed, partial = bool(rec.get("completed")), bool(rec.get("partial"))
        self.completed += completed * n
        self.partial += partial * n
        self.stopped += (not (completed or partial)) * n
        self.stop_reasons[rec.get("stop") or "unknown"] += n
        if not (completed or partial):
            self.stopped_reasons[rec.get("stop") or "unknown"] += n
        self.kept_turns += turns
        self.kept_reasoning_turns += reasoning_turns
        for name, (count, failures) in (rec.get("tools") or {}).items():
            t = self.tools.setdefault(name, [0, 0])
            t[0] += count * n
            t[1] += failures * n

    def merge(self, other: RunStats) -> None:
        """Add the counts of another run's statistics (the shards of a merged run)."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, Counter):
                mine.update(theirs)
            elif isinstance(mine, Usage):
                mine.add(theirs)
            elif f.name == "tools":
                for name, (count, failures) in theirs.items():
                    t = mine.setdefault(name, [0, 0])
                    t[0], t[1] = t[0] + count, t[1] + failures
            elif f.name == "batches":
                for batch, counts in theirs.items():
                    mine.setdefault(batch, Counter()).update(counts)
            elif isinstance(mine, ScoreTally):
                mine.merge(theirs)
            else:
                setattr(self, f.name, mine + theirs)

    def tool_statistics(self, tool_names: list[str]) -> dict:
        out = {}
        for name in sorted(set(tool_names) | set(self.tools)):
            count, failures = self.tools.get(name, (0, 0))
            success = count - failures
            out[name] = {
                "count": count,
                "success": success,
                "failure": failures,
                "success_rate": _rate(success, count),
                "failure_rate": _rate(failures, count),
            }
        return out

    def reasoning_statistics(self, kept_only: bool = False) -> dict:
        total, with_r = (
            (self.kept_turns, self.kept_reasoning_turns) if kept_only else (self.turns, self.reasoning_turns)
        )
        return {
            "total_assistant_turns": total,
            "turns_with_reasoning": with_r,
            "turns_without_reasoning": total - with_r,
            "coverage_percent": _rate(with_r, total),
        }
