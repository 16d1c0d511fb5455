"""`report.html`: one self-contained page per run or sweep: summary, plots, comparison, trajectory viewer.

    python -m hermes_runner.report outputs/my_run          # a run (finished or still going)
    python -m hermes_runner.report outputs/my_sweep        # a multirun: its jobs side by side
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

from hermes_runner import svgchart
from hermes_runner.messages import to_openai
from hermes_runner.rundata import STATUSES, NotARunDir, RunData, find_runs, job_labels, status_of
from hermes_runner.store import atomic_write
from hermes_runner.tools.registry import all_tools

log = logging.getLogger(__name__)

REPORT = "report.html"
MAX_TRAJECTORIES = 500
MAX_CHARS = 4000  # per message text in the viewer
TRAJECTORY_BUDGET = 60_000  # characters per trajectory; texts past it are cut shorter
SHORT_CHARS = 400
STATUS_COLORS = {
    "completed": "#2f9e5b", "partial": "#e6a23c", "incomplete": "#7c83d6",
    "discarded": "#9aa0a6", "failed": "#d64545", "pending": "#dfe3e8",
}  # fmt: skip
ASSETS = resources.files("hermes_runner") / "report_assets"


# -- numbers -------------------------------------------------------------------------------


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
        "kept_pct": _pct(s.ok, done),
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
        "invocations": len(run.invocations) + (1 if run.live else 0),
        "tool_calls": calls,
        "tool_success_pct": _pct(calls - fails, calls),
        "unknown_tool_calls": sum(s.unknown_tools.values()),
        "reasoning_pct": _pct(s.reasoning_turns, s.turns),
        "reasoning_kept_pct": _pct(s.kept_reasoning_turns, s.kept_turns),
        "mean_turns": _mean([r.get("turns", 0) for r in trajs]),
        "mean_api_calls": _mean([r.get("api_calls", 0) for r in run.final.values()]),
        "mean_duration_s": _mean([r.get("duration_s", 0.0) for r in run.final.values()]),
    }


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0


def toolset_usage(job: Job) -> tuple[list[str], dict[str, list[float]]]:
    """(toolsets, {"target %", "sampled %", "used %"}) over the run's trajectories."""
    owner = {name: t.toolset for name, t in all_tools().items()}
    trajs = job.trajectories
    sampled: Counter = Counter()
    used: Counter = Counter()
    for r in trajs:
        sampled.update(set(r.get("toolsets") or []))
        used.update({owner[n] for n, (count, _) in (r.get("tools") or {}).items() if count and n in owner})
    target = job.run.target_toolsets()
    names = sorted(set(sampled) | set(used) | set(target))
    n = len(trajs)
    series: dict[str, list[float]] = {}
    if target:
        series["target %"] = [float(target.get(ts, 0.0)) for ts in names]
    series["sampled %"] = [_pct(sampled[ts], n) for ts in names]
    series["used %"] = [_pct(used[ts], n) for ts in names]
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


# -- charts --------------------------------------------------------------------------------


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

    rows = [row(st, st, counts[st]) for st in ("completed", "partial", "incomplete") if counts[st] or st != "incomplete"]
    rows += [row(f"discarded · {why}", "discarded", n) for why, n in s.discarded.most_common()] or [
        row("discarded", "discarded", 0)
    ]
    rows += [row(f"failed · {err}", "failed", n) for err, n in s.failed.most_common()] or [row("failed", "failed", 0)]
    if pending:
        rows.append(row("pending", "pending", pending))
    return rows


def run_charts(job: Job, summ: dict) -> list[Chart]:
    """The plots of one run."""
    run, s = job.run, job.run.stats
    series = [*STATUSES, "pending"]
    colors = [STATUS_COLORS[k] for k in series]
    charts = [
        Chart(
            "Outcomes",
            svgchart.stacked_bars(outcome_rows(job, summ["pending"]), series, colors, label="outcomes"),
            f"{summ['done']:,} of {summ['total']:,} prompts done" if summ["total"] is not None
            else f"{summ['done']:,} prompts done so far",
        )
    ]  # fmt: skip
    tools = sorted(((n, t) for n, t in s.tools.items() if t[0]), key=lambda kv: -kv[1][0])
    if tools:
        rows = [(name, [count - failures, failures]) for name, (count, failures) in tools]
        svg = svgchart.stacked_bars(
            rows, ["success", "failure"], ["#2f9e5b", "#d64545"], label="tool calls",
            annotate=lambda v: f"{int(sum(v)):,} calls · {svgchart.fmt_pct(_pct(v[0], sum(v)))} ok",
        )  # fmt: skip
        note = "kept trajectories"
        if s.unknown_tools:
            note += "; calls to tools that do not exist: " + ", ".join(f"{k} ×{v}" for k, v in s.unknown_tools.items())
        charts.append(Chart("Tool calls and success rate per tool", svg, note))
    else:
        charts.append(Chart("Tool calls and success rate per tool", "", "no tool calls in kept trajectories"))
    trajs = job.trajectories
    charts.append(
        Chart(
            "Assistant turns per trajectory",
            svgchart.histogram({job.label: [r.get("turns", 0) for r in trajs]}, label="turns", x_title="turns"),
            f"kept and discarded trajectories; mean {summ['mean_turns']:g}",
        )
    )
    charts.append(
        Chart(
            "API calls per prompt",
            svgchart.histogram(
                {job.label: [r.get("api_calls", 0) for r in run.final.values()]}, label="api calls", x_title="API calls"
            ),
            f"every prompt, failed ones included; {s.retries:,} retries in all",
        )
    )
    names, ts_series = toolset_usage(job)
    if names:
        charts.append(
            Chart(
                "Toolsets: sampled vs. used",
                svgchart.grouped_bars(names, ts_series, ["#bab0ac", "#4e79a7", "#f28e2b"][-len(ts_series):],
                                      label="toolsets", fmt=svgchart.fmt_pct, max_value=100),
                "share of trajectories whose sampled toolsets included it, and in which one of its tools was called",
            )  # fmt: skip
        )
    cov = [0.0] * len(COVERAGE_BINS)
    for r in trajs:
        b = coverage_bin(r)
        if b is not None:
            cov[b] += 1
    charts.append(
        Chart(
            "Reasoning coverage",
            svgchart.columns(list(COVERAGE_BINS), {job.label: cov}, ["#b07aa1"], label="reasoning coverage",
                             x_title="assistant turns with reasoning, per trajectory", y_title="trajectories"),
            f"{summ['reasoning_pct']:g}% of {s.turns:,} assistant turns have reasoning "
            f"({summ['reasoning_kept_pct']:g}% in kept trajectories)",
        )  # fmt: skip
    )
    charts.append(
        Chart(
            "Time per prompt",
            svgchart.histogram(
                {job.label: [r.get("duration_s", 0.0) for r in run.final.values()]}, label="duration",
                x_title="seconds",
            ),
            f"mean {summ['mean_duration_s']:g}s; wall time of the run {summ['duration_s']:.1f}s",
        )  # fmt: skip
    )
    return charts


def comparison_charts(jobs: list[Job], summs: list[dict]) -> list[Chart]:
    """Plots that put a sweep's jobs side by side."""
    series = [*STATUSES, "pending"]
    rows = [(j.name, [*(sm["counts"][k] for k in STATUSES), sm["pending"] or 0]) for j, sm in zip(jobs, summs)]
    charts = [
        Chart("Outcomes per job", svgchart.stacked_bars(rows, series, [STATUS_COLORS[k] for k in series],
                                                         label="outcomes per job")),
    ]  # fmt: skip
    tool_names = sorted({n for j in jobs for n, t in j.run.stats.tools.items() if t[0]})
    if tool_names:
        rate = {}
        calls = {}
        for j in jobs:
            t = j.run.stats.tools
            calls[j.name] = [float(t.get(n, (0, 0))[0]) for n in tool_names]
            rate[j.name] = [_pct(t[n][0] - t[n][1], t[n][0]) if n in t else 0.0 for n in tool_names]
        charts.append(Chart("Tool calls per tool", svgchart.grouped_bars(tool_names, calls, label="tool calls")))
        charts.append(
            Chart("Tool success rate per tool", svgchart.grouped_bars(tool_names, rate, label="tool success",
                                                                      fmt=svgchart.fmt_pct, max_value=100))
        )  # fmt: skip
    charts.append(
        Chart(
            "Assistant turns per trajectory",
            svgchart.histogram({j.name: [r.get("turns", 0) for r in j.trajectories] for j in jobs}, label="turns",
                               x_title="turns", y_title="trajectories"),
        )  # fmt: skip
    )
    charts.append(
        Chart(
            "API calls per prompt",
            svgchart.histogram({j.name: [r.get("api_calls", 0) for r in j.run.final.values()] for j in jobs},
                               label="api calls", x_title="API calls"),
        )  # fmt: skip
    )
    metrics = ["kept %", "reasoning coverage %", "tool success %"]
    values = {j.name: [sm["kept_pct"], sm["reasoning_pct"], sm["tool_success_pct"]] for j, sm in zip(jobs, summs)}
    charts.append(
        Chart("Rates per job", svgchart.grouped_bars(metrics, values, label="rates", fmt=svgchart.fmt_pct, max_value=100))
    )
    return charts


COMPARE_ROWS = [
    ("model", "model", "s"), ("distribution", "distribution", "s"), ("prompts done", "done", "n"),
    ("pending", "pending", "n"), ("kept", "kept", "n"), ("kept %", "kept_pct", "%"),
    ("completed", "counts.completed", "n"), ("partial", "counts.partial", "n"),
    ("discarded", "counts.discarded", "n"), ("failed", "counts.failed", "n"),
    ("mean turns", "mean_turns", "f"), ("mean API calls", "mean_api_calls", "f"),
    ("tool calls", "tool_calls", "n"), ("tool success %", "tool_success_pct", "%"),
    ("reasoning coverage %", "reasoning_pct", "%"), ("tokens", "tokens", "n"), ("cost (USD)", "cost_usd", "$"),
    ("mean time per prompt (s)", "mean_duration_s", "f"), ("wall time (s)", "duration_s", "f"),
]  # fmt: skip


def compare_table(summs: list[dict]) -> list[dict]:
    """Rows of the side-by-side table: metric, one formatted cell per job."""
    out = []
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


# -- trajectory viewer data -----------------------------------------------------------------


def pick(groups: list[list[str]], cap: int) -> list[set[str]]:
    """Share `cap` among groups (small ones whole, the rest evenly), sampling each evenly over its order."""
    take = [0] * len(groups)
    left = cap
    order = sorted(range(len(groups)), key=lambda i: len(groups[i]))
    for n, i in enumerate(order):
        share = left // (len(groups) - n)
        take[i] = min(len(groups[i]), share)
        left -= take[i]
    out = []
    for g, k in zip(groups, take):
        if k >= len(g):
            out.append(set(g))
        else:
            out.append({g[int(i * len(g) / k)] for i in range(k)} if k else set())
    return out


class Clipper:
    """Cuts long texts, tighter once a trajectory has used its budget."""

    def __init__(self, max_chars: int, budget: int = TRAJECTORY_BUDGET):
        self.max_chars, self.budget, self.used = max_chars, budget, 0

    def __call__(self, text: str, where: str = "") -> str:
        limit = self.max_chars if self.used < self.budget else min(self.max_chars, SHORT_CHARS)
        self.used += min(len(text), limit)
        if len(text) <= limit:
            return text
        return f"{text[:limit]}\n… [{len(text) - limit:,} more characters not shown here{where}]"

    def tree(self, value: object) -> object:
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {k: self.tree(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.tree(v) for v in value]
        return value


def _parse(text: str) -> object:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def view_messages(entry: dict, clip: Clipper, where: str) -> tuple[list[dict], dict]:
    """Display messages of one trajectory, and its system prompt / offered tools."""
    conv = to_openai(entry, reasoning="field")
    out: list[dict] = []
    system = ""
    for m in conv["messages"]:
        role = m["role"]
        if role == "system":
            system = m["content"]
        elif role == "user":
            out.append({"r": "user", "c": clip(m["content"], where)})
        elif role == "assistant":
            msg: dict = {"r": "assistant", "c": clip(m.get("content") or "", where)}
            if m.get("reasoning_content"):
                msg["th"] = clip(m["reasoning_content"], where)
            calls = []
            for c in m.get("tool_calls") or []:
                raw = c["function"]["arguments"]
                args = _parse(raw)
                call = {"n": c["function"]["name"], "id": c["id"]}
                if isinstance(args, dict):
                    call["a"] = clip.tree(args)
                else:
                    call["raw"], call["bad"] = clip(raw, where), True
                calls.append(call)
            if calls:
                msg["calls"] = calls
            out.append(msg)
        elif role == "tool":
            body = _parse(m["content"])
            msg = {"r": "tool", "n": m.get("name", ""), "id": m.get("tool_call_id", "")}
            if isinstance(body, dict):
                msg["o"] = clip.tree(body)
                msg["err"] = bool(body.get("error"))
            else:
                msg["c"] = clip(m["content"], where)
                msg["err"] = False
            out.append(msg)
    tools = [t["function"]["name"] for t in conv["tools"]]
    return out, {"system": system, "tools": tools}


def viewer_data(jobs: list[Job], max_trajectories: int, max_chars: int) -> dict:
    groups: list[list[str]] = []
    where: list[tuple[int, str]] = []
    for ji, job in enumerate(jobs):
        for status, keys in job.run.by_status().items():
            if keys:
                groups.append(keys)
                where.append((ji, status))
    chosen = pick(groups, max_trajectories)
    shown = sum(len(c) for c in chosen)
    total = sum(len(g) for g in groups)
    heads: list[str] = []  # distinct (system prompt, tools) blocks, shared by index
    head_ids: dict[str, int] = {}
    items: list[dict] = []
    for ji, job in enumerate(jobs):
        keys = set().union(*(c for c, (j, _) in zip(chosen, where) if j == ji)) if chosen else set()
        if not keys:
            continue
        ordered = [k for k in job.run.final if k in keys]
        failures = job.run.failures()
        entries = dict((rec["key"], e) for rec, e in job.run.entries(ordered))
        for key in ordered:
            rec = job.run.final[key]
            items.append(_item(len(items), ji, rec, entries.get(key), failures.get(key), max_chars, heads, head_ids))
    return {
        "jobs": [j.name for j in jobs],
        "tags": [j.tag for j in jobs],
        "colors": [svgchart.color(i) for i in range(len(jobs))],
        "heads": heads,
        "items": items,
        "shown": shown,
        "total": total,
        "max_chars": max_chars,
        "statuses": list(STATUSES),
    }


def _item(n: int, ji: int, rec: dict, entry: dict | None, failure: dict | None, max_chars: int,
          heads: list[str], head_ids: dict[str, int]) -> dict:  # fmt: skip
    status = status_of(rec)
    clip = Clipper(max_chars)
    called = sorted({*(k for k, v in (rec.get("tools") or {}).items() if v and v[0]), *(rec.get("unknown_tools") or {})})
    item = {
        "id": n, "j": ji, "key": rec["key"], "idx": rec.get("index"), "st": status,
        "why": rec.get("reason") or rec.get("error_type") or rec.get("stop") or "",
        "tools": called, "unknown": sorted(rec.get("unknown_tools") or {}), "toolsets": rec.get("toolsets") or [],
        "turns": rec.get("turns", 0), "calls": rec.get("api_calls", 0), "dur": rec.get("duration_s", 0.0),
        "tok": (rec.get("usage") or {}).get("total_tokens", 0), "cost": (rec.get("usage") or {}).get("cost_usd", 0.0),
        "retries": rec.get("retries", 0), "inv": rec.get("inv"), "batch": rec.get("batch"),
    }  # fmt: skip
    if entry is not None:
        fname = "discarded.jsonl" if status == "discarded" else "trajectories.jsonl"
        msgs, head = view_messages(entry, clip, f"; see {fname}")
        text = json.dumps(head, ensure_ascii=False)
        if text not in head_ids:
            head_ids[text] = len(heads)
            heads.append(text)
        item["head"] = head_ids[text]
        item["msgs"] = msgs
        meta = entry.get("metadata") or {}
        item["model"] = meta.get("model", "")
        item["fields"] = meta.get("row_fields", "")
        item["tool_errors"] = sum(1 for m in msgs if m.get("err")) + sum(
            1 for m in msgs for c in m.get("calls", []) if c.get("bad")
        )
    else:
        detail = failure or {}
        prompt = detail.get("prompt", "")
        item["msgs"] = ([{"r": "user", "c": clip(prompt, "; see failures.jsonl")}] if prompt else []) + [
            {"r": "error", "c": f"{rec.get('error_type', 'Error')}: {rec.get('error', '')}",
             "tb": clip(detail.get("traceback", ""), "; see failures.jsonl")}
        ]  # fmt: skip
        item["tool_errors"] = 0
    first_user = next((m["c"] for m in item["msgs"] if m["r"] == "user"), "")
    item["prompt"] = first_user[:240]
    return item


# -- page ------------------------------------------------------------------------------------


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(ASSETS)), autoescape=select_autoescape(["html", "j2"]), trim_blocks=True,
        lstrip_blocks=True,
    )  # fmt: skip
    env.filters["num"] = lambda v: "–" if v is None else f"{v:,}"
    env.filters["secs"] = _secs
    return env


def _secs(v: float) -> str:
    v = float(v or 0)
    if v < 120:
        return f"{v:.1f}s"
    if v < 7200:
        return f"{v / 60:.1f} min"
    return f"{v / 3600:.1f} h"


def script_json(data: object) -> str:
    """JSON safe to embed in a <script type="application/json"> element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("</", "<\\/").replace("<!--", "<\\!--").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render(root: Path, jobs: list[Job], sweep: bool, max_trajectories: int, max_chars: int) -> str:
    summs = [summary(j) for j in jobs]
    data = viewer_data(jobs, max_trajectories, max_chars)
    page = {
        "title": jobs[0].run.name if not sweep else root.name,
        "root": str(root),
        "sweep": sweep,
        "live": any(sm["live"] for sm in summs),
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "jobs": [
            {"label": j.label, "tag": j.tag, "color": svgchart.color(i), "summary": sm, "charts": run_charts(j, sm),
             "dir": str(j.run.dir)}
            for i, (j, sm) in enumerate(zip(jobs, summs))
        ],
        "compare": compare_table(summs) if sweep else [],
        "compare_charts": comparison_charts(jobs, summs) if sweep else [],
        "shown": data["shown"],
        "total": data["total"],
        "max_chars": max_chars,
        "status_colors": STATUS_COLORS,
    }
    env = _env()
    return env.get_template("report.html.j2").render(
        page=page,
        css=(ASSETS / "report.css").read_text(),
        js=(ASSETS / "report.js").read_text(),
        data=script_json(data),
    )


def build_report(
    path: Path | str, out: Path | str | None = None, max_trajectories: int = MAX_TRAJECTORIES, max_chars: int = MAX_CHARS
) -> Path:
    """Write the report of a run or sweep directory; return its path."""
    root = Path(path)
    dirs = find_runs(root)
    sweep = dirs != [root]
    labels = job_labels(root, dirs) if sweep else [root.name]
    jobs = [Job(label, RunData.load(d), f"#{i + 1}" if sweep else "") for i, (label, d) in enumerate(zip(labels, dirs))]
    html = render(root, jobs, sweep, max_trajectories, max_chars)
    target = Path(out) if out else root / REPORT
    atomic_write(target, html.encode())
    return target


def write_report_quietly(path: Path | str) -> Path | None:
    """Build the report at the end of a run; a failure is a warning, never a failed run."""
    try:
        return build_report(path)
    except NotARunDir as exc:  # nothing ran yet
        log.debug("no report: %s", exc)
        return None
    except Exception as exc:  # noqa: BLE001 - the run's data is safe; only the page is missing
        log.warning("could not write %s in %s: %s: %s", REPORT, path, type(exc).__name__, exc, exc_info=log.isEnabledFor(logging.DEBUG))
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hermes_runner.report", description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="a run directory (outputs/<run_name>) or a sweep directory holding job subdirectories")
    ap.add_argument("--out", help=f"where to write the page (default: <dir>/{REPORT})")
    ap.add_argument("--max-trajectories", type=int, default=MAX_TRAJECTORIES,
                    help=f"trajectories embedded in the viewer, sampled across statuses (default {MAX_TRAJECTORIES})")
    ap.add_argument("--max-chars", type=int, default=MAX_CHARS,
                    help=f"characters shown per message before it is cut (default {MAX_CHARS})")  # fmt: skip
    args = ap.parse_args(argv)
    if args.max_trajectories < 0 or args.max_chars < 100:
        ap.error("--max-trajectories must be >= 0 and --max-chars >= 100")
    try:
        target = build_report(args.dir, args.out, args.max_trajectories, args.max_chars)
    except NotARunDir as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
