"""Trajectory entries: the ShareGPT conversion (Hermes function-calling style) and entry schema.

Every entry has the same keys with one JSON type each (no value that is null in one row and a string
in another, the same keys on every turn), so that any number of files of a run load with
`datasets.load_dataset("json", ...)` as one schema; `features()` is that schema (docs/training.md).
Tool calls live in exactly one place, chosen by `output.layout`:

* `hermes` (default): turns are `{from, value}`; a gpt turn's value holds its `<tool_call>` blocks and
  a tool turn's value its `<tool_response>` blocks, as the original Hermes runner writes them. No turn
  has a key a trainer would hand to the chat template as structured tool calls.
* `structured`: turns are `{from, value, tool_calls}`; a gpt turn's value holds only its reasoning and
  text, `tool_calls` its calls (`arguments` as JSON objects), `[]` on every other turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from typing import Protocol

from hermes_runner.config import OutputLayout
from hermes_runner.dataset import Prompt, system_text
from hermes_runner.rundir.layout import FEATURES_FILE  # noqa: F401  (re-exported)
from hermes_runner.trajectory.hermes import _gpt_value, _tool_block, structured_calls, system_turn
from hermes_runner.usage import Usage

# The keys and Arrow types of one record of an entry's `scores` (score/base.py `Score` writes them).
SCORE_TYPES = {
    "name": "string",
    "kind": "string",
    "value": "float64",
    "passed": "bool",
    "explanation": "string",
    "error": "string",
    "exit_code": "int64",
    "output": "string",
    "details": "string",
}
NOT_SCORED = "not scored"  # `error` of a record that stands for no judgment at all


def unscored_record(name: str = "", kind: str = "") -> dict:
    """The record of a scorer that never judged the row; an entry no scorer judged holds one with name "", so that
    every file infers the same `scores` type (an empty list would be list<null>)."""
    return score_record({"name": name, "kind": kind, "error": NOT_SCORED})


class OfferedTool(Protocol):
    """A tool the model was offered, as far as its trajectory needs it (`tools.base.Tool` is one)."""

    def openai_schema(self) -> dict: ...


class Conversation(Protocol):
    """A finished conversation, as far as its entry needs it (`agent.SessionResult` is one)."""

    prompt: Prompt
    tools: Sequence[OfferedTool]  # the tools the model was offered
    toolsets: Sequence[str]
    history: Sequence[dict]  # user, assistant and tool messages
    api_calls: int
    stop_reason: str
    tool_calls: Sequence[tuple[str, bool]]  # (tool name, ok) in call order
    usage: Usage
    cache_hits: int  # calls the response cache answered (not in api_calls)
    saved: Usage  # their usage

    @property
    def completed(self) -> bool: ...
    @property
    def partial(self) -> bool: ...


def conversations(
    result: Conversation, system_prompt: str = "", layout: OutputLayout = OutputLayout.hermes
) -> list[dict]:
    """The ShareGPT turns of a session in the given layout (module docstring)."""
    structured = layout == OutputLayout.structured

    def turn(who: str, value: str, calls: list[dict] | None = None) -> dict:
        return {"from": who, "value": value, "tool_calls": calls or []} if structured else {"from": who, "value": value}

    system = system_text(system_prompt, result.prompt)  # the run's, then the row's own (an `input` list's)
    turns: list[dict] = [turn("system", system_turn([t.openai_schema() for t in result.tools], system))]
    pending_tools: list[str] = []
    for msg in result.history:
        role = msg["role"]
        if role == "tool":
            pending_tools.append(_tool_block(msg))
            continue
        if pending_tools:
            turns.append(turn("tool", "\n".join(pending_tools)))
            pending_tools = []
        if role == "user":
            turns.append(turn("human", str(msg["content"])))
        elif role == "system":  # a budget note kept by limits.keep_note
            turns.append(turn("system", str(msg["content"])))
        elif role == "assistant":
            calls = structured_calls(msg) if structured else None
            turns.append(turn("gpt", _gpt_value(msg, with_calls=not structured), calls))
    if pending_tools:
        turns.append(turn("tool", "\n".join(pending_tools)))
    return turns


def tool_stats(result: Conversation, tool_names: list[str]) -> tuple[dict, dict]:
    """(tool_stats, tool_error_counts), zero-filled over every registered tool."""
    stats = {name: {"count": 0, "success": 0, "failure": 0} for name in tool_names}
    for name, ok in result.tool_calls:
        if name in stats:
            s = stats[name]
            s["count"] += 1
            s["success" if ok else "failure"] += 1
    return stats, {name: s["failure"] for name, s in stats.items()}


def reasoning_turns(result: Conversation) -> tuple[int, int]:
    """(assistant turns, turns with reasoning)."""
    turns = [m for m in result.history if m["role"] == "assistant"]
    return len(turns), sum(1 for m in turns if m.get("reasoning"))


def entry(
    result: Conversation,
    *,
    batch_num: int,
    model: str,
    tool_names: list[str],
    system_prompt: str,
    layout: OutputLayout = OutputLayout.hermes,
    discard_reason: str = "",
    reward: float = 0.0,
    scores: Sequence[dict] = (),
    agent: str = "",
) -> dict:
    """One line of batch_N.jsonl (or discarded.jsonl): every row has the same keys, each with one type.

    Unset values are empty strings, never null (`image`, `cwd`, `discard_reason`); the dataset row's own
    fields, of any types, are kept as one JSON text (`metadata.row_fields`: `json.loads` gives them back).
    `scores` holds one record of SCORE_TYPES per configured scorer, the primary's first (no scorer: one record
    with name "" and error "not scored"), `reward` the primary's value (0.0 unscored)."""
    p = result.prompt
    stats, errors = tool_stats(result, tool_names)
    out = {
        "prompt_index": int(p.index),
        "conversations": conversations(result, system_prompt, layout),
        "metadata": {
            "batch_num": int(batch_num),
            "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
            "model": str(model),
            "prompt_key": str(p.key),
            "sample_index": int(p.sample),  # which of the row's samples_per_prompt runs
            "image": str(p.image or ""),
            "cwd": str(p.cwd or ""),
            "row_fields": json.dumps(p.fields, ensure_ascii=False, sort_keys=True),
            "agent": str(agent),  # the program that drove it, with its version (agent.name)
        },
        "completed": bool(result.completed),
        "partial": bool(result.partial),
        "stop_reason": str(result.stop_reason),
        "discard_reason": str(discard_reason),
        "api_calls": 0,
        "toolsets_used": [str(t) for t in result.toolsets],
        "tool_stats": stats,
        "tool_error_counts": errors,
        "usage": {},
        "reward": float(reward),
        "scores": [score_record(r) for r in scores] or [unscored_record()],
    }
    return count(out, result)


def count(entry: dict, result: Conversation) -> dict:
    """The entry with the calls and usage of `result` (paid now or replayed from the cache: the same entry)."""
    spent = Usage.from_dict(result.usage.as_dict())
    spent.add(result.saved)
    entry["api_calls"] = int(result.api_calls + result.cache_hits)
    entry["usage"] = {k: (float(v) if k == "cost_usd" else int(v)) for k, v in spent.as_dict().items()}
    return entry


def score_record(rec: dict) -> dict:
    """A score record with exactly the keys and types of SCORE_TYPES."""
    cast = {"string": str, "float64": float, "bool": bool, "int64": int}
    defaults = {"string": "", "float64": 0.0, "bool": False, "int64": -1}
    out = {}
    for key, dtype in SCORE_TYPES.items():
        value = rec.get(key)
        out[key] = defaults[dtype] if value is None else cast[dtype](value)
    if not out["details"]:
        out["details"] = "{}"
    return out


def row_key(entry: dict) -> str:
    """The dataset row an entry answers: the samples of one row share it (`metadata.row_key` when the entry has
    one, else its prompt key without the `~s<sample>` suffix of samples after the first)."""
    meta = entry.get("metadata") or {}
    key = str(meta.get("row_key") or meta.get("prompt_key") or "")
    return key.split("~s", 1)[0]


def sample_index(entry: dict) -> int:
    """Which sample of its row an entry is (`metadata.sample_index`; 0 when it has none)."""
    value = (entry.get("metadata") or {}).get("sample_index")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def best_of_k(entries: Iterable[tuple[str, dict]]) -> set[str]:
    """The keys of the best sample of each row among (key, entry): the highest reward, ties to the lowest
    sample_index (then the key)."""
    best: dict[str, tuple[float, int, str]] = {}
    for key, e in entries:
        rank = (-float(e.get("reward") or 0.0), sample_index(e), key)
        row = row_key(e) or key
        if row not in best or rank < best[row]:
            best[row] = rank
    return {rank[2] for rank in best.values()}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _timestamp(value: object) -> str:
    """An ISO 8601 time as `entry` writes it (UTC, seconds); a naive time is taken as the machine's local time."""
    try:
        t = datetime.fromisoformat(str(value))
    except ValueError:
        return datetime.fromtimestamp(0, UTC).isoformat(timespec="seconds")
    return t.astimezone(UTC).isoformat(timespec="seconds")


def conform(
    row: dict,
    *,
    key: str,
    tool_names: list[str],
    layout: OutputLayout = OutputLayout.hermes,
    scores: Sequence[dict] = (),
) -> dict:
    """Another runner's trajectory (the original Hermes runner's batch line) with the keys and types of `entry`.

    Its turns keep `from` and `value` (the text form of its calls); its tool counts are taken for the tools in
    `tool_names` (the original line stays as it was in its own batch file). It was never scored: `scores` are
    the run's "not scored" records (score.unscored), reward 0."""
    meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    turns = []
    for t in row.get("conversations") or ():
        if isinstance(t, dict):
            turn: dict = {"from": str(t.get("from", "")), "value": str(t.get("value") or "")}
            if layout == OutputLayout.structured:
                turn["tool_calls"] = []
            turns.append(turn)
    stats_in = row.get("tool_stats") if isinstance(row.get("tool_stats"), dict) else {}
    errors_in = row.get("tool_error_counts") if isinstance(row.get("tool_error_counts"), dict) else {}
    stats = {}
    for name in tool_names:
        t = stats_in.get(name) if isinstance(stats_in.get(name), dict) else {}
        stats[name] = {k: _int(t.get(k)) for k in ("count", "success", "failure")}
    extra = {k: v for k, v in meta.items() if k not in ("batch_num", "timestamp", "model", "image", "cwd")}
    return {
        "prompt_index": _int(row.get("prompt_index")),
        "conversations": turns,
        "metadata": {
            "batch_num": _int(meta.get("batch_num")),
            "timestamp": _timestamp(meta.get("timestamp")),
            "model": str(meta.get("model") or ""),
            "prompt_key": key,
            "sample_index": 0,
            "image": str(meta.get("image") or ""),
            "cwd": str(meta.get("cwd") or ""),
            "row_fields": json.dumps(extra, ensure_ascii=False, sort_keys=True, default=str),
            "agent": str(meta.get("agent") or ""),
        },
        "completed": bool(row.get("completed")),
        "partial": bool(row.get("partial")),
        "stop_reason": str(row.get("stop_reason") or ("final_answer" if row.get("completed") else "")),
        "discard_reason": "",
        "api_calls": _int(row.get("api_calls")),
        "toolsets_used": [str(t) for t in row.get("toolsets_used") or () if isinstance(t, str)],
        "tool_stats": stats,
        "tool_error_counts": {name: _int(errors_in.get(name)) for name in tool_names},
        "usage": {k: (0.0 if k == "cost_usd" else 0) for k in Usage().as_dict()},
        "reward": 0.0,
        "scores": [score_record(r) for r in scores] or [unscored_record()],
    }


# -- the HF `datasets` features of these rows (written beside them as dataset_features.json) --------


def _value(dtype: str) -> dict:
    return {"dtype": dtype, "_type": "Value"}


def _list(feature: object) -> dict:
    return {"feature": feature, "_type": "List"}


def features(tool_names: list[str], layout: OutputLayout = OutputLayout.hermes) -> dict:
    """`datasets.Features.to_dict()` of the entries above (datasets >= 4): `Features.from_dict(...)`.

    The structured layout's `arguments` are JSON objects of any shape: `Json` (datasets >= 5) keeps them."""
    turn: dict = {"from": _value("string"), "value": _value("string")}
    if layout == OutputLayout.structured:
        call = {
            "id": _value("string"),
            "type": _value("string"),
            "function": {"name": _value("string"), "arguments": {"_type": "Json"}},
        }
        turn["tool_calls"] = _list(call)
    counts = {k: _value("int64") for k in ("count", "success", "failure")}
    return {
        "prompt_index": _value("int64"),
        "conversations": _list(turn),
        "metadata": {
            "batch_num": _value("int64"),
            "timestamp": _value("timestamp[s]"),  # what datasets (pyarrow) infers from the ISO 8601 text
            "model": _value("string"),
            "prompt_key": _value("string"),
            "sample_index": _value("int64"),
            "image": _value("string"),
            "cwd": _value("string"),
            "row_fields": _value("string"),
            "agent": _value("string"),
        },
        "completed": _value("bool"),
        "partial": _value("bool"),
        "stop_reason": _value("string"),
        "discard_reason": _value("string"),
        "api_calls": _value("int64"),
        "toolsets_used": _list(_value("string")),
        "tool_stats": {n: dict(counts) for n in tool_names},
        "tool_error_counts": {n: _value("int64") for n in tool_names},
        "usage": {f.name: _value("float64" if f.name == "cost_usd" else "int64") for f in fields(Usage)},
        "reward": _value("float64"),
        "scores": _list({k: _value(t) for k, t in SCORE_TYPES.items()}),
    }
