"""The numbers of a run for its report: summary, toolset usage, reasoning coverage, the comparison table."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hermes_runner.rundir.reader import STATUSES, RunData, status_of


@dataclass
class Job:
    """One run of the report (a sweep has several), with its label."""

    label: str
    run: RunData
    tag: str = ""  # "#1", "#2"... in a sweep

    @property
    def name(self) -> str:
        return f"{self.tag} {self.label}" if self.tag else self.label

    @property
    def trajectories(self) -> list[dict]:
        """Final records of kept and discarded prompts."""
        return [r for r in self.run.final.values() if r["status"] != "failed"]


def summary(job: Job) -> dict:
    run, s = job.run, job.run.stats
    counts = Counter(status_of(r) for r in run.final.values())
    total = run.total_prompts()
    done = len(run.final)
    trajs = job.trajectories
    calls = sum(t[0] for t in s.tools.values())
    fails = sum(t[1] for t in s.tools.values())
    u = s.usage
    return {
        "label": job.label,
        "run_name": run.name,
        "model": run.config_value("model.name") or "",
        "distribution": (run.config_value("distribution") or {}).get("name", ""),
        "live": run.live,
        "total": total,
        "done": done,
        "pending": (total - done) if total is not None else None,
        "counts": {k: counts.get(k, 0) for k in STATUSES},
        "kept": s.ok,
        "kept_pct": pct(s.ok, done),
        "discarded_by_reason": dict(s.discarded.most_common()),
        "failed_by_error": dict(s.failed.most_common()),
        "tokens": u.total_tokens,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "cached_tokens": u.cached_tokens,
        "reasoning_tokens": u.reasoning_tokens,
        "cost_usd": float(u.cost_usd),
        "duration_s": run.duration_s(),
        "prompt_seconds": s.prompt_seconds,
        "api_calls": s.api_calls,
        "retries": s.retries,
        "cache_hits": s.cache_hits,  # calls the response cache answered: not in api_calls, tokens or cost
        "tokens_saved": s.saved.total_tokens,
        "cost_saved_usd": float(s.saved.cost_usd),
        # (an invocation is recorded as it starts; one of an older runner only at its end)
        "invocations": len(run.invocations) + (1 if run.live and all(i.get("ended") for i in run.invocations) else 0),
        "tool_calls": calls,
        "tool_success_pct": pct(calls - fails, calls),
        "unknown_tool_calls": sum(s.unknown_tools.values()),
        "reasoning_pct": pct(s.reasoning_turns, s.turns),
        "reasoning_kept_pct": pct(s.kept_reasoning_turns, s.kept_turns),
        "mean_turns": mean([r.get("turns", 0) for r in trajs]),
        "mean_api_calls": mean([r.get("api_calls", 0) for r in run.final.values()]),
        "mean_duration_s": mean([r.get("duration_s", 0.0) for r in run.final.values()]),
        **score_summary(job),
    }


def score_summary(job: Job) -> dict:
    """`scores` (the score table: a row per scorer and scope) and `scores_overall` (scorer -> estimate), or nothing
    when no record carries scores. k is the samples_per_prompt of the run, as its statistics say (else the most
    samples a row has)."""
    tally = job.run.stats.scores
    if not tally.scorers:
        return {}
    k = (job.run.statistics or {}).get("samples_per_prompt") or max(1, tally.samples_per_row())
    est = tally.summary(k, job.run.config_value("model.name") or "")
    table = []
    for title, scope in (("all", {"": est["overall"]}), ("model", est["by_model"]), ("toolset", est["by_toolset"])):
        for group, per_scorer in scope.items():
            for scorer, e in per_scorer.items():
                table.append(
                    {
                        "scorer": scorer,
                        "scope": f"{title} {group}".strip(),
                        "n": e["samples"],
                        "rows": e["rows"],
                        "mean": pm(e["mean"], e["mean_se"]),
                        "pass_at_1": pm(e["pass_at_1"], e["pass_at_1_se"]),
                        "pass_at_k": pm(e["pass_at_k"], e["pass_at_k_se"]),
                        "pass_hat_k": pm(e["pass_hat_k"], e["pass_hat_k_se"]),
                    }
                )
    return {
        "scores": table,
        "scores_k": k,
        "scores_by_k": by_k_rows(est["overall"]) if k > 1 else [],
        "scores_overall": est["overall"],
        "unscored": est["unscored"],
    }


def by_k_rows(overall: dict) -> list[dict]:
    """The rows of pass@j and pass^j for every j <= k, over all prompts: one per scorer and j."""
    return [
        {
            "scorer": scorer,
            "k": c["k"],
            "rows": c["rows"],
            "pass_at_k": pm(c["pass_at_k"], c["pass_at_k_se"]),
            "pass_hat_k": pm(c["pass_hat_k"], c["pass_hat_k_se"]),
        }
        for scorer, e in overall.items()
        for c in e["by_k"]
    ]


def pm(value: float | None, err: float | None) -> str:
    """An estimate with its standard error: 0.500 ± 0.289 (– when there is none)."""
    if value is None:
        return "–"
    return f"{value:.3f}" + (f" ± {err:.3f}" if err is not None else "")


def pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


def mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0


UNKNOWN_TOOLSET = "unknown"  # the toolset of tools called in a run dir that does not record tool -> toolset


def toolset_usage(job: Job) -> tuple[list[str], dict[str, list[float]]]:
    """(toolsets, {"target %", "sampled %", "used %"}) over the run's trajectories."""
    owner = job.run.tool_toolsets()  # None: a run dir from before run.json recorded it
    trajs = job.trajectories
    sampled: Counter = Counter()
    used: Counter = Counter()
    for r in trajs:
        sampled.update(set(r.get("toolsets") or []))
        called = [n for n, (count, _) in (r.get("tools") or {}).items() if count]
        if owner is None:
            used.update({UNKNOWN_TOOLSET} if called else set())
        else:
            used.update({owner[n] for n in called if n in owner})
    target = job.run.target_toolsets()
    names = sorted(set(sampled) | set(used) | set(target))
    n = len(trajs)
    series: dict[str, list[float]] = {}
    if target:
        series["target %"] = [float(target.get(ts, 0.0)) for ts in names]
    series["sampled %"] = [pct(sampled[ts], n) for ts in names]
    series["used %"] = [pct(used[ts], n) for ts in names]
    return names, series


COVERAGE_BINS = ("0%", "1–24%", "25–49%", "50–74%", "75–99%", "100%")


def coverage_bin(rec: dict) -> int | None:
    turns = rec.get("turns", 0)
    if not turns:
        return None
    pct = 100.0 * rec.get("reasoning_turns", 0) / turns
    if pct == 0:
        return 0
    if pct == 100:
        return 5
    return 1 + min(3, int(pct // 25))


COMPARE_ROWS = [
    ("model", "model", "s"),
    ("distribution", "distribution", "s"),
    ("prompts done", "done", "n"),
    ("pending", "pending", "n"),
    ("kept", "kept", "n"),
    ("kept %", "kept_pct", "%"),
    ("completed", "counts.completed", "n"),
    ("partial", "counts.partial", "n"),
    ("discarded", "counts.discarded", "n"),
    ("failed", "counts.failed", "n"),
    ("mean turns", "mean_turns", "f"),
    ("mean API calls", "mean_api_calls", "f"),
    ("tool calls", "tool_calls", "n"),
    ("tool success %", "tool_success_pct", "%"),
    ("reasoning coverage %", "reasoning_pct", "%"),
    ("tokens", "tokens", "n"),
    ("cost (USD)", "cost_usd", "$"),
    ("mean time per prompt (s)", "mean_duration_s", "f"),
    ("wall time (s)", "duration_s", "f"),
]


def score_rows(summs: list[dict]) -> list[dict]:
    """The side-by-side rows of the scores: per scorer mean, pass@1, pass@k and pass^k of each job (– where it has
    none)."""
    scorers: list[str] = []
    for sm in summs:
        scorers += [name for name in sm.get("scores_overall") or {} if name not in scorers]
    ks = {sm["scores_k"] for sm in summs if sm.get("scores_k")}
    k = str(ks.pop()) if len(ks) == 1 else "k"
    out = []
    for name in scorers:
        ests = [(sm.get("scores_overall") or {}).get(name) for sm in summs]
        for title, field in (
            ("mean", "mean"),
            ("pass@1", "pass_at_1"),
            (f"pass@{k}", "pass_at_k"),
            (f"pass^{k}", "pass_hat_k"),
        ):
            cells = ["–" if e is None else pm(e[field], e[f"{field}_se"]) for e in ests]
            if field in ("pass_at_k", "pass_hat_k") and k == "k":
                cells = [c if e is None else f"{c} (k={e['k']})" for c, e in zip(cells, ests, strict=True)]
            out.append({"metric": f"{name} {title}", "cells": cells})
        out.append({"metric": f"{name} samples", "cells": ["–" if e is None else f"{e['samples']:,}" for e in ests]})
    return out


def compare_table(summs: list[dict]) -> list[dict]:
    """Rows of the side-by-side table: metric, one formatted cell per job (the scores first, when there are some)."""
    out = score_rows(summs)
    for title, path, kind in COMPARE_ROWS:
        raw = []
        for sm in summs:
            v: object = sm
            for part in path.split("."):
                v = v.get(part) if isinstance(v, dict) else None
            raw.append(v)
        cells = [_fmt(v, kind) for v in raw]
        out.append({"metric": title, "cells": cells})
    return out


def _fmt(v: object, kind: str) -> str:
    if v is None:
        return "–"
    if kind == "s":
        return str(v)
    if kind == "%":
        return f"{v:g}%"
    if kind == "$":
        return f"${v:,.4f}"
    if kind == "f":
        return f"{v:,.2f}"
    return f"{v:,}"
