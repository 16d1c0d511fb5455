"""Data of the report's trajectory viewer: which trajectories to embed, and their messages ready to show."""

from __future__ import annotations

import json

from hermes_runner.report import svg as svgchart
from hermes_runner.report.summary import Job
from hermes_runner.rundir.layout import DISCARDED, TRAJECTORIES
from hermes_runner.rundir.reader import STATUSES, status_of
from hermes_runner.trajectory.entry import NOT_SCORED
from hermes_runner.trajectory.openai import to_openai
from hermes_runner.util.text import clip

MAX_TRAJECTORIES = 500
MAX_CHARS = 4000  # per message text in the viewer
TRAJECTORY_BUDGET = 40_000  # characters per trajectory; texts past it are cut shorter
SHORT_CHARS = 400
RAW_CHARS = 500  # per string in the raw-JSON tab (its texts are in the conversation tab already)
RAW_BUDGET = 6_000  # characters of a raw entry before its strings are cut to SHORT_CHARS
MAX_TIMELINE = 500  # calls shown per trajectory


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
    for g, k in zip(groups, take, strict=False):
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
        where = where.replace("{", "{{").replace("}", "}}")  # (a format string: {n} is the count)
        return clip(text, limit, f"\n… [{{n:,}} more characters not shown here{where}]", head=1)

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
        keys = set().union(*(c for c, (j, _) in zip(chosen, where, strict=False) if j == ji)) if chosen else set()
        if not keys:
            continue
        ordered = [k for k in job.run.final if k in keys]
        failures = job.run.failures()
        timelines = job.run.timelines(ordered)
        entries = dict((rec["key"], e) for rec, e in job.run.entries(ordered))
        for key in ordered:
            rec = job.run.final[key]
            item = _item(len(items), ji, rec, entries.get(key), failures.get(key), max_chars, heads, head_ids)
            if key in timelines:
                item["timeline"] = timelines[key][:MAX_TIMELINE]
                item["timeline_cut"] = max(0, len(timelines[key]) - MAX_TIMELINE)
            items.append(item)
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


def _item(
    n: int,
    ji: int,
    rec: dict,
    entry: dict | None,
    failure: dict | None,
    max_chars: int,
    heads: list[str],
    head_ids: dict[str, int],
) -> dict:
    status = status_of(rec)
    clip = Clipper(max_chars)
    called = sorted(
        {*(k for k, v in (rec.get("tools") or {}).items() if v and v[0]), *(rec.get("unknown_tools") or {})}
    )
    item = {
        "id": n,
        "j": ji,
        "key": rec["key"],
        "idx": rec.get("index"),
        "st": status,
        "why": rec.get("reason") or rec.get("error_type") or rec.get("stop") or "",
        "tools": called,
        "unknown": sorted(rec.get("unknown_tools") or {}),
        "toolsets": rec.get("toolsets") or [],
        "turns": rec.get("turns", 0),
        "calls": rec.get("api_calls", 0),
        "dur": rec.get("duration_s", 0.0),
        "tok": (rec.get("usage") or {}).get("total_tokens", 0),
        "cost": (rec.get("usage") or {}).get("cost_usd", 0.0),
        "retries": rec.get("retries", 0),
        "inv": rec.get("inv"),
        "batch": rec.get("batch"),
    }
    raw = Clipper(min(max_chars, RAW_CHARS), RAW_BUDGET)
    if entry is not None:
        _entry_view(item, rec, entry, clip, raw, heads, head_ids)
    else:
        detail = failure or {}
        prompt = detail.get("prompt", "")
        item["msgs"] = ([{"r": "user", "c": clip(prompt, "; see failures.jsonl")}] if prompt else []) + [
            {
                "r": "error",
                "c": f"{rec.get('error_type', 'Error')}: {rec.get('error', '')}",
                "tb": clip(detail.get("traceback", ""), "; see failures.jsonl"),
            }
        ]
        item["tool_errors"] = 0
        item["raw"] = {"failure": raw.tree(detail), "ledger record": rec}
    first_user = next((m["c"] for m in item["msgs"] if m["r"] == "user"), "")
    item["prompt"] = first_user[:240]
    return item


def _entry_view(
    item: dict, rec: dict, entry: dict, clip: Clipper, raw: Clipper, heads: list[str], head_ids: dict[str, int]
) -> None:
    """A kept or discarded prompt's messages (its system turn and tools shared in `heads`), model and scores."""
    fname = DISCARDED if item["st"] == "discarded" else TRAJECTORIES
    msgs, head = view_messages(entry, clip, f"; see {fname}")
    text = json.dumps(head, ensure_ascii=False)
    if text not in head_ids:
        head_ids[text] = len(heads)
        heads.append(text)
    meta = entry.get("metadata") or {}
    item.update(head=head_ids[text], msgs=msgs, model=meta.get("model", ""), fields=meta.get("row_fields", ""))
    bad_calls = sum(1 for m in msgs for c in m.get("calls", []) if c.get("bad"))
    item["tool_errors"] = sum(1 for m in msgs if m.get("err")) + bad_calls
    _scores(item, entry, clip)
    item["raw"] = {"entry": raw.tree(entry), "ledger record": rec}


def _scores(item: dict, entry: dict, clip: Clipper) -> None:
    """The entry's reward and its scorers' outputs, when it was scored ("not scored" records stand for none)."""
    scores = entry.get("scores")
    judged = (
        [s for s in scores if isinstance(s, dict) and s.get("error") != NOT_SCORED] if isinstance(scores, list) else []
    )
    reward = entry.get("reward")
    if isinstance(reward, int | float) and not isinstance(reward, bool) and (judged or not isinstance(scores, list)):
        item["reward"] = reward
    if judged:
        item["scores"] = [
            {
                "name": str(s.get("name", "")),
                "value": s.get("value"),
                "passed": s.get("passed"),
                "explanation": clip(str(s.get("explanation") or "")),
            }
            for s in judged
        ]
