"""A run as an Inspect AI eval log (`.eval`): what `inspect view`, `inspect_ai.log.read_eval_log` and Inspect's
other readers take.

One log per run: every sample the run finished (kept and discarded, `metadata.disposition` says which) with its
messages, tool calls and results, its scores with their explanations, its model usage and times, and every prompt
that still failed as a sample with its `error` (from the ledger and failures.jsonl). A dataset row is a sample id,
its k samples (`samples_per_prompt`) are the epochs 1..k. An entry's `provenance` goes into its sample's metadata.

The file is written here, not with inspect-ai's own models: `inspect-ai` would downgrade packages our venv relies
on (fsspec, python-dateutil) and bring a web server, S3 and a TUI. The format is a zip of JSON members, log schema
version 2: `header.json` (the EvalLog without samples), `samples/<id>_epoch_<n>.json` (one EvalSample each),
`summaries.json` (the sample list the viewer shows) and `_journal/start.json`; tests/e2e/test_export_inspect.py
reads it with the real inspect-ai and loads it in `inspect view`.
"""

from __future__ import annotations

import json
import tempfile
import uuid
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

from hermes_runner import __version__
from hermes_runner.dataset.hf import HF_PREFIX
from hermes_runner.rundir.metrics import mean_se
from hermes_runner.rundir.reader import RunData
from hermes_runner.rundir.store import atomic_write
from hermes_runner.trajectory.openai import to_openai
from hermes_runner.usage import Usage

SCHEMA_VERSION = 2  # Inspect's LOG_SCHEMA_VERSION
SOLVER = "hermes-runner"
STOP_REASONS = {"final_answer": "stop", "length": "max_tokens"}  # ours -> Inspect's (else "unknown")
SCORE_METADATA = ("kind", "passed", "error", "exit_code", "output", "details")
LIMITS = {  # our stop reasons that are a limit -> (Inspect's limit type, where the run's config holds the limit)
    "max_turns": ("turn", ("max_turns",)),
    "token_limit": ("token", ("limits", "prompt_max_tokens")),
    "cost_limit": ("cost", ("limits", "prompt_max_cost_usd")),
    "timeout": ("time", ("limits", "timeout_s")),  # Inspect's time_limit: wall clock, as ours
}
DISPOSITIONS = {"ok": "kept", "discarded": "discarded", "failed": "failed"}


def _uuid(*parts: str) -> str:
    """A stable id: the same run exports the same log."""
    return uuid.uuid5(uuid.NAMESPACE_URL, "hermes-runner:" + ":".join(parts)).hex


def model_usage(usage: dict | None) -> dict:
    """Our usage record as Inspect's ModelUsage."""
    u = Usage.from_dict(usage)
    return {
        "input_tokens": u.prompt_tokens,
        "output_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens or u.prompt_tokens + u.completion_tokens,
        "input_tokens_cache_read": u.cached_tokens,
        "reasoning_tokens": u.reasoning_tokens,
        "total_cost": u.cost_usd,
    }


def _content(m: dict) -> str | list[dict]:
    """A message's text, with its reasoning first as Inspect's `reasoning` content when it has some."""
    text = m.get("content") or ""
    if not m.get("reasoning_content"):
        return text
    parts = [{"type": "reasoning", "reasoning": m["reasoning_content"]}]
    return parts + ([{"type": "text", "text": text}] if text else [])


def messages(entry: dict, model: str) -> list[dict]:
    """An entry's conversation as Inspect ChatMessages (system, user, assistant with tool calls, tool)."""
    names = {}
    out = []
    for m in to_openai(entry, reasoning="field")["messages"]:
        msg: dict = {"role": m["role"], "content": _content(m)}
        if m["role"] == "assistant":
            calls = m.get("tool_calls") or []
            names.update({c["id"]: c["function"]["name"] for c in calls})
            msg["tool_calls"] = [_tool_call(c) for c in calls] or None
            msg["model"] = model
            msg["source"] = "generate"
        elif m["role"] == "tool":
            msg["tool_call_id"] = m.get("tool_call_id") or None
            msg["function"] = m.get("name") or names.get(m.get("tool_call_id") or "")
            msg["error"] = _tool_error(msg["content"])
        out.append(msg)
    return out


def _tool_error(content: object) -> dict | None:
    """Inspect's ToolCallError of a tool result whose JSON has an `error` (our tools report failures so)."""
    try:
        result = json.loads(content) if isinstance(content, str) else None
    except ValueError:
        return None
    error = result.get("error") if isinstance(result, dict) else None
    return {"type": "unknown", "message": str(error)} if error else None


def _tool_call(c: dict) -> dict:
    raw = c["function"]["arguments"]
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        args = None
    call = {"id": c["id"], "function": c["function"]["name"], "arguments": args if isinstance(args, dict) else {}}
    if not isinstance(args, dict):
        call["parse_error"] = f"arguments are not a JSON object: {str(raw)[:200]}"
    return call


def scores(entry: dict, answer: str) -> dict[str, dict] | None:
    """An entry's score records as Inspect Scores by scorer name (a record of no judgment at all is left out)."""
    out = {}
    for s in entry.get("scores") or []:
        if not isinstance(s, dict) or not s.get("name"):
            continue
        out[s["name"]] = {
            "value": float(s.get("value") or 0.0),
            "answer": answer,
            "explanation": s.get("explanation") or s.get("error") or None,
            "metadata": {k: s[k] for k in SCORE_METADATA if k in s},
        }
    return out or None


def _times(rec: dict) -> dict:
    """started_at, completed_at, total_time of a ledger record (its `ts` is when the prompt ended)."""
    if not rec.get("ts"):
        return {}
    end = datetime.fromisoformat(rec["ts"])
    took = float(rec.get("duration_s") or 0.0)
    return {
        "started_at": (end - timedelta(seconds=took)).isoformat(),
        "completed_at": end.isoformat(),
        "total_time": took,
        "working_time": took,
    }


def _limit(run: RunData, stop: str) -> dict | None:
    """Inspect's EvalSampleLimit of a conversation a limit stopped, with the limit as the run was configured."""
    if stop not in LIMITS:
        return None
    kind, where = LIMITS[stop]
    value: object = (run.invocations[-1].get("config") or {}) if run.invocations else {}
    for key in where:
        value = value.get(key) if isinstance(value, dict) else None
    return {"type": kind, "limit": float(value) if isinstance(value, int | float) else 0.0, "reason": stop}


def _ids(key: str, rec: dict) -> tuple[str, int]:
    """(sample id, epoch): the dataset row's key and 1 + the sample's index."""
    return str(rec.get("row") or key), int(rec.get("sample") or 0) + 1


def _target(entry: dict) -> str:
    try:
        row = json.loads((entry.get("metadata") or {}).get("row_fields") or "{}")
    except ValueError:
        return ""
    target = row.get("target") if isinstance(row, dict) else None
    return "" if target is None else target if isinstance(target, str) else json.dumps(target)


def entry_sample(run: RunData, key: str, rec: dict, entry: dict) -> dict:
    """The EvalSample of a finished (kept or discarded) prompt."""
    sid, epoch = _ids(key, rec)
    meta = entry.get("metadata") or {}
    model = str(meta.get("model") or rec.get("model") or "")
    msgs = messages(entry, model)
    user = next((m["content"] for m in msgs if m["role"] == "user"), "")
    last = next((m for m in reversed(msgs) if m["role"] == "assistant"), None)
    answer = _text(last["content"]) if last else ""
    metadata = {
        **meta,
        "disposition": DISPOSITIONS.get(rec["status"], rec["status"]),
        "discard_reason": entry.get("discard_reason") or "",
        "stop_reason": entry.get("stop_reason") or "",
        "completed": bool(entry.get("completed")),
        "partial": bool(entry.get("partial")),
        "reward": entry.get("reward"),
        "api_calls": entry.get("api_calls"),
        "toolsets_used": entry.get("toolsets_used") or [],
    }
    if "provenance" in entry:
        metadata["provenance"] = entry["provenance"]
    usage = model_usage(entry.get("usage") or rec.get("usage"))
    output = {"model": model, "completion": answer, "usage": usage, "choices": []}
    if last:
        stop = STOP_REASONS.get(str(entry.get("stop_reason")), "unknown")
        output["choices"] = [{"message": last, "stop_reason": stop}]
    return {
        "id": sid,
        "epoch": epoch,
        "input": user if isinstance(user, str) else _text(user),
        "target": _target(entry),
        "messages": msgs,
        "output": output,
        "scores": scores(entry, answer),
        "metadata": metadata,
        "model_usage": {model: usage},
        "uuid": _uuid(run.name, key),
        "limit": _limit(run, str(entry.get("stop_reason"))),
        **_times(rec),
    }


def _text(content: str | list[dict]) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if p.get("type") == "text")


def failed_sample(run: RunData, key: str, rec: dict, detail: dict) -> dict:
    """The EvalSample of a prompt that still failed: its prompt and its error, no messages from the model."""
    sid, epoch = _ids(key, rec)
    prompt = str(detail.get("prompt") or "")
    message = f"{rec.get('error_type') or 'Error'}: {rec.get('error') or ''}"
    trace = str(detail.get("traceback") or message)
    model = str(rec.get("model") or run.config_value("model.name") or "")
    return {
        "id": sid,
        "epoch": epoch,
        "input": prompt,
        "target": "",
        "messages": [{"role": "user", "content": prompt, "source": "input"}] if prompt else [],
        "output": {"model": model, "choices": [], "completion": ""},
        "metadata": {"disposition": "failed", "prompt_index": rec.get("index"), "error_type": rec.get("error_type")},
        "model_usage": {model: model_usage(rec.get("usage"))} if model else {},
        "uuid": _uuid(run.name, key),
        "error": {"message": message, "traceback": trace, "traceback_ansi": trace},
        **_times(rec),
    }


def samples(run: RunData, provenance: Callable[[dict, dict], dict] | None = None) -> Iterator[dict]:
    """Every sample of the run, in prompt order: finished ones from their entries (with `provenance(rec, entry)`
    when given), failed ones from the ledger."""
    finished = [k for k, r in run.final.items() if r["status"] != "failed"]
    entries = run.entries(finished)  # read one at a time, in this same order (a missing one is skipped)
    details = run.failures()
    ahead = next(entries, None)
    for key, rec in run.final.items():
        if rec["status"] == "failed":
            yield failed_sample(run, key, rec, details.get(key, {}))
        elif ahead is not None and ahead[0]["key"] == key:
            entry = ahead[1] if provenance is None else {**ahead[1], "provenance": provenance(rec, ahead[1])}
            yield entry_sample(run, key, rec, entry)
            ahead = next(entries, None)


def summary(sample: dict) -> dict:
    """A sample's line in summaries.json (what the viewer lists)."""
    keep = ("id", "epoch", "input", "target", "metadata", "scores", "model_usage", "uuid")
    times = ("started_at", "completed_at", "total_time", "working_time")
    out = {k: sample[k] for k in keep if k in sample} | {k: sample[k] for k in times if k in sample}
    error, limit = sample.get("error"), sample.get("limit")
    return out | {
        "error": error["message"] if error else None,
        "limit": limit["type"] if limit else None,
        "limit_reason": limit["reason"] if limit else None,
        "completed": True,
        "message_count": len(sample.get("messages") or []),
    }


# -- the header -----------------------------------------------------------------------------------


def results(all_samples: list[dict]) -> dict:
    """EvalResults: per scorer, the mean value, the share that passed and the mean's standard error."""
    names = list(dict.fromkeys(n for s in all_samples for n in s.get("scores") or {}))
    out = []
    for name in names:
        judged = [s["scores"][name] for s in all_samples if name in (s.get("scores") or {})]
        scored = [j for j in judged if not j["metadata"].get("error")]
        mean, se = mean_se([j["value"] for j in scored])
        passed = sum(1 for j in scored if j["metadata"].get("passed")) / len(scored) if scored else None
        metrics = {"mean": mean, "accuracy": passed, "stderr": se}
        out.append(
            {
                "name": name,
                "scorer": name,
                "scored_samples": len(scored),
                "unscored_samples": len(all_samples) - len(scored),
                "params": {},
                "metrics": {k: {"name": k, "value": v, "params": {}} for k, v in metrics.items() if v is not None},
                "metadata": {"kind": judged[0]["metadata"].get("kind", "")},
            }
        )
    done = sum(1 for s in all_samples if not s.get("error"))
    return {"total_samples": len(all_samples), "completed_samples": done, "scores": out}


def _epochs(run: RunData, all_samples: list[dict]) -> int:
    """samples_per_prompt as the run was configured (its latest invocation), else the most epochs a row has."""
    configured = [(inv.get("config") or {}).get("samples_per_prompt") for inv in run.invocations]
    configured = [int(k) for k in configured if isinstance(k, int)]
    return configured[-1] if configured else max((s["epoch"] for s in all_samples), default=1)


def spec(run: RunData, all_samples: list[dict]) -> dict:
    """EvalSpec: the task (the run), its dataset, the model, epochs = samples_per_prompt."""
    cfg = run.manifest.get("data_config") or {}
    dataset = str(cfg.get("dataset_file") or "")
    ids = list(dict.fromkeys(s["id"] for s in all_samples))
    scorers = cfg.get("scorers") or {}
    generate = {"temperature": cfg.get("model.temperature"), "max_tokens": cfg.get("max_tokens")}
    return {
        "eval_id": _uuid(run.name, "eval"),
        "run_id": _uuid(run.name, "run"),
        "created": run.manifest.get("created") or _first(all_samples, "started_at") or datetime.now(UTC).isoformat(),
        "task": run.name,
        "task_id": _uuid(run.name, "task"),
        "task_version": 0,
        "solver": SOLVER,
        "dataset": {
            "name": _dataset_name(dataset),
            "location": dataset or None,
            "samples": len(ids),
            "sample_ids": ids,
            "shuffled": False,
        },
        "model": str(cfg.get("model.name") or _first(all_samples, "model") or "unknown"),
        "model_generate_config": {k: v for k, v in generate.items() if v is not None},
        "config": {"epochs": _epochs(run, all_samples), "fail_on_error": False},
        "packages": {"hermes-runner": __version__},
        "scorers": [{"name": n, "options": {"kind": (s or {}).get("kind")}} for n, s in scorers.items()] or None,
        "metadata": {"run_dir": run.dir.name, "max_turns": cfg.get("max_turns"), "seed": cfg.get("seed")},
    }


def _dataset_name(dataset: str) -> str | None:
    """A hub dataset's name (`hf:<name>`), else the file's or directory's name without its suffix."""
    if dataset.startswith(HF_PREFIX):
        return dataset[len(HF_PREFIX) :]
    return PurePosixPath(dataset).stem or None


def _first(all_samples: list[dict], field: str) -> str | None:
    if field == "model":
        return next((m for s in all_samples for m in s.get("model_usage") or {}), None)
    return min((s[field] for s in all_samples if s.get(field)), default=None)


def header(run: RunData, all_samples: list[dict]) -> dict:
    """The EvalLog without its samples (header.json), from the samples or their summaries."""
    totals: dict[str, Usage] = {}
    for s in all_samples:
        for model, u in (s.get("model_usage") or {}).items():
            totals.setdefault(model, Usage()).add(_our_usage(u))
    cfg = run.manifest.get("data_config") or {}
    step = {"solver": SOLVER, "params": {"max_turns": cfg.get("max_turns"), "system_prompt": cfg.get("system_prompt")}}
    return {
        "version": SCHEMA_VERSION,
        "status": "started" if run.live else "success",
        "eval": spec(run, all_samples),
        "plan": {"name": "plan", "steps": [step], "config": {}},
        "results": results(all_samples),
        "stats": {
            "started_at": _first(all_samples, "started_at") or "",
            "completed_at": max((s["completed_at"] for s in all_samples if s.get("completed_at")), default=""),
            "model_usage": {m: model_usage(u.as_dict()) for m, u in totals.items()},
        },
    }


def _our_usage(u: dict) -> Usage:
    return Usage(
        prompt_tokens=u["input_tokens"],
        completion_tokens=u["output_tokens"],
        cached_tokens=u.get("input_tokens_cache_read") or 0,
        reasoning_tokens=u.get("reasoning_tokens") or 0,
        total_tokens=u["total_tokens"],
        cost_usd=u.get("total_cost") or 0.0,
    )


def write_eval(run: RunData, path: Path, provenance: Callable[[dict, dict], dict] | None = None) -> int:
    """Write the run's `.eval` log at `path` (atomically); return how many samples it holds.

    Samples go into the zip one by one (a spooled file holds it, on disk past 64 MB); the header is made from
    their summaries."""
    sums = []
    with tempfile.SpooledTemporaryFile(max_size=64 << 20) as buf:
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for s in samples(run, provenance):
                zf.writestr(_member(f"samples/{s['id']}_epoch_{s['epoch']}.json"), _dumps(s))
                sums.append(summary(s))
            head = header(run, sums)
            start = {"version": SCHEMA_VERSION, "eval": head["eval"], "plan": head["plan"]}
            zf.writestr(_member("_journal/start.json"), _dumps(start))
            zf.writestr(_member("summaries.json"), _dumps(sums))
            zf.writestr(_member("header.json"), _dumps(head))
        buf.seek(0)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, iter(lambda: buf.read(1 << 20), b""))
    return len(sums)


def _member(name: str) -> zipfile.ZipInfo:
    """A zip member with a fixed date: the same run exports to the same bytes (`export --reproduce`)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)
