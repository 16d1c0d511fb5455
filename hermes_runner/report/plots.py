"""The plots of a report: one run's charts, and the charts that compare a sweep's jobs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hermes_runner.report import svg as svgchart
from hermes_runner.report.summary import COVERAGE_BINS, Job, coverage_bin, pct, toolset_usage
from hermes_runner.rundir.reader import STATUSES, status_of
from hermes_runner.rundir.stats import RunStats

STATUS_COLORS = {
    "completed": "#2f9e5b",
    "partial": "#e6a23c",
    "incomplete": "#7c83d6",
    "discarded": "#9aa0a6",
    "failed": "#d64545",
    "pending": "#dfe3e8",
}


@dataclass
class Chart:
    title: str
    svg: str
    note: str = ""


def outcome_rows(job: Job, pending: int | None) -> list[tuple[str, list[float]]]:
    series = [*STATUSES, "pending"]
    s = job.run.stats
    counts = Counter(status_of(r) for r in job.run.final.values())

    def row(label: str, status: str, v: float) -> tuple[str, list[float]]:
        return label, [v if st == status else 0 for st in series]

    rows = [
        row(st, st, counts[st]) for st in ("completed", "partial", "incomplete") if counts[st] or st != "incomplete"
    ]
    rows += [row(f"discarded · {why}", "discarded", n) for why, n in s.discarded.most_common()] or [
        row("discarded", "discarded", 0)
    ]
    rows += [row(f"failed · {err}", "failed", n) for err, n in s.failed.most_common()] or [row("failed", "failed", 0)]
    if pending:
        rows.append(row("pending", "pending", pending))
    return rows


def run_charts(job: Job, summ: dict) -> list[Chart]:
    """The plots of one run."""
    s, trajs, final = job.run.stats, job.trajectories, job.run.final.values()
    series = [*STATUSES, "pending"]
    total = f" of {summ['total']:,}" if summ["total"] is not None else ""
    return [
        Chart(
            "Outcomes",
            svgchart.stacked_bars(
                outcome_rows(job, summ["pending"]), series, [STATUS_COLORS[k] for k in series], label="outcomes"
            ),
            f"{summ['done']:,}{total} prompts done" + ("" if total else " so far"),
        ),
        _tool_chart(s),
        Chart(
            "Assistant turns per trajectory",
            svgchart.histogram(
                {job.label: [r.get("turns", 0) for r in trajs]}, label="turns", x_title="turns", y_title="trajectories"
            ),
            f"kept and discarded trajectories; mean {summ['mean_turns']:g}",
        ),
        Chart(
            "API calls per prompt",
            svgchart.histogram(
                {job.label: [r.get("api_calls", 0) for r in final]}, label="api calls", x_title="API calls"
            ),
            f"every prompt, failed ones included; {s.retries:,} retries in all",
        ),
        *_toolset_chart(job),
        _coverage_chart(job, summ),
        Chart(
            "Time per prompt",
            svgchart.histogram(
                {job.label: [r.get("duration_s", 0.0) for r in final]}, label="duration", x_title="seconds"
            ),
            f"mean {summ['mean_duration_s']:g}s; wall time of the run {summ['duration_s']:.1f}s",
        ),
    ]


def _tool_chart(s: RunStats) -> Chart:
    """Calls and failures per tool, in kept trajectories."""
    tools = sorted(((n, t) for n, t in s.tools.items() if t[0]), key=lambda kv: -kv[1][0])
    if not tools:
        return Chart("Tool calls and success rate per tool", "", "no tool calls in kept trajectories")
    svg = svgchart.stacked_bars(
        [(name, [count - failures, failures]) for name, (count, failures) in tools],
        ["success", "failure"],
        ["#2f9e5b", "#d64545"],
        label="tool calls",
        annotate=lambda v: f"{int(sum(v)):,} calls · {svgchart.fmt_pct(pct(v[0], sum(v)))} ok",
    )
    note = "kept trajectories"
    if s.unknown_tools:
        note += "; calls to tools that do not exist: " + ", ".join(f"{k} ×{v}" for k, v in s.unknown_tools.items())
    return Chart("Tool calls and success rate per tool", svg, note)


def _toolset_chart(job: Job) -> list[Chart]:
    """Toolsets sampled vs. used (none when no trajectory names its toolsets)."""
    names, ts_series = toolset_usage(job)
    if not names:
        return []
    svg = svgchart.grouped_bars(
        names,
        ts_series,
        ["#bab0ac", "#4e79a7", "#f28e2b"][-len(ts_series) :],
        label="toolsets",
        fmt=svgchart.fmt_pct,
        max_value=100,
    )
    what = "share of trajectories whose sampled toolsets included it, and in which one of its tools was called"
    return [Chart("Toolsets: sampled vs. used", svg, what)]


def _coverage_chart(job: Job, summ: dict) -> Chart:
    """How many trajectories have reasoning in what share of their assistant turns."""
    cov = [0.0] * len(COVERAGE_BINS)
    for r in job.trajectories:
        if (b := coverage_bin(r)) is not None:
            cov[b] += 1
    return Chart(
        "Reasoning coverage",
        svgchart.columns(
            list(COVERAGE_BINS),
            {job.label: cov},
            ["#b07aa1"],
            label="reasoning coverage",
            x_title="assistant turns with reasoning, per trajectory",
            y_title="trajectories",
        ),
        f"{summ['reasoning_pct']:g}% of {job.run.stats.turns:,} assistant turns have reasoning "
        f"({summ['reasoning_kept_pct']:g}% in kept trajectories)",
    )


def comparison_charts(jobs: list[Job], summs: list[dict]) -> list[Chart]:
    """Plots that put a sweep's jobs side by side."""
    series = [*STATUSES, "pending"]
    rows = [
        (j.name, [*(sm["counts"][k] for k in STATUSES), sm["pending"] or 0]) for j, sm in zip(jobs, summs, strict=False)
    ]
    charts = [
        Chart(
            "Outcomes per job",
            svgchart.stacked_bars(rows, series, [STATUS_COLORS[k] for k in series], label="outcomes per job"),
        ),
    ]
    tool_names = sorted({n for j in jobs for n, t in j.run.stats.tools.items() if t[0]})
    if tool_names:
        rate = {}
        calls = {}
        for j in jobs:
            t = j.run.stats.tools
            calls[j.name] = [float(t.get(n, (0, 0))[0]) for n in tool_names]
            rate[j.name] = [pct(t[n][0] - t[n][1], t[n][0]) if n in t else 0.0 for n in tool_names]
        charts.append(Chart("Tool calls per tool", svgchart.grouped_bars(tool_names, calls, label="tool calls")))
        charts.append(
            Chart(
                "Tool success rate per tool",
                svgchart.grouped_bars(tool_names, rate, label="tool success", fmt=svgchart.fmt_pct, max_value=100),
            )
        )
    charts.append(
        Chart(
            "Assistant turns per trajectory",
            svgchart.histogram(
                {j.name: [r.get("turns", 0) for r in j.trajectories] for j in jobs},
                label="turns",
                x_title="turns",
                y_title="trajectories",
            ),
        )
    )
    charts.append(
        Chart(
            "API calls per prompt",
            svgchart.histogram(
                {j.name: [r.get("api_calls", 0) for r in j.run.final.values()] for j in jobs},
                label="api calls",
                x_title="API calls",
            ),
        )
    )
    metrics = ["kept %", "reasoning coverage %", "tool success %"]
    values = {
        j.name: [sm["kept_pct"], sm["reasoning_pct"], sm["tool_success_pct"]]
        for j, sm in zip(jobs, summs, strict=False)
    }
    charts.append(
        Chart(
            "Rates per job", svgchart.grouped_bars(metrics, values, label="rates", fmt=svgchart.fmt_pct, max_value=100)
        )
    )
    return charts
