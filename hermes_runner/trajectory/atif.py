"""A trajectory entry as an ATIF trajectory (Harbor's Agent Trajectory Interchange Format, RFC 0001, v1.7).

One entry (either output layout) becomes one trajectory: the run's system prompt a `system` step, each user
message a `user` step, each assistant message an `agent` step (its text, reasoning and tool calls), and the tool
results that answer it that step's `observation`, one result per call (`source_call_id`: the call's id; parallel
calls are one step with several calls and several results). The offered tools are `agent.tool_definitions`.
A tool that ran a model of its own (MoA, vision) gets an embedded subagent trajectory, linked from its result by
`subagent_trajectory_ref.trajectory_id`. Per-step `metrics` come from the prompt's timeline (the agent model's
calls) when it has one call per agent step; `final_metrics` from the entry's usage (every model call of the
prompt, the tools' own included); everything else of the entry (scores, reward, stop reason, metadata,
provenance, ...) is kept whole in the trajectory's `extra`.

Pure: dicts in, dicts out (the export writes the files: trajectory/export.py)."""

from __future__ import annotations

import json

from hermes_runner.trajectory.hermes import parsed_args
from hermes_runner.trajectory.openai import to_openai

SCHEMA_VERSION = "ATIF-v1.7"  # trajectory_id, subagent_trajectories and the `extra` of results are 1.7
AGENT_NAME = "hermes-runner"
# Tools that run a model of their own: the argument holding its question, the result key holding its answer, and
# what the embedded trajectory of one such call holds and leaves out (its `notes`).
SUBAGENT_TOOLS = {
    "mixture_of_agents": (
        "user_prompt",
        "response",
        "The aggregator model's answer to the question; the reference models' own answers are not recorded "
        "(their tokens are in the parent's final_metrics).",
    ),
    "vision_analyze": (
        "question",
        "analysis",
        "The vision model's answer to the question about the image of the call's image_url (not embedded).",
    ),
}
SOURCES = {"system": "system", "user": "user", "assistant": "agent"}
NOTES = (
    "Converted from a hermes-runner trajectory entry. final_metrics count every model call of the prompt, "
    "those of tools that run models (MoA, vision) included; per-step metrics are the agent model's own calls."
)


def to_atif(
    entry: dict, *, session_id: str, version: str, timeline: list[dict] | None = None, disposition: str = "kept"
) -> dict:
    """The ATIF trajectory (a JSON-ready dict) of one entry; `timeline`: the prompt's timed calls (rundir
    timeline.jsonl), `disposition`: kept or discarded (in `extra`)."""
    conv = to_openai(entry, reasoning="field")
    meta = entry.get("metadata") or {}
    agent: dict = {"name": AGENT_NAME, "version": version}
    if meta.get("model"):
        agent["model_name"] = str(meta["model"])
    if conv["tools"]:
        agent["tool_definitions"] = conv["tools"]
    n_agent = sum(1 for m in conv["messages"] if m["role"] == "assistant")
    steps, subagents = _steps(conv["messages"], step_metrics(timeline, n_agent), session_id, version)
    if not steps:  # ATIF needs one step at least: an entry without messages keeps its place
        steps = [{"step_id": 1, "source": "system", "message": ""}]
    out: dict = {
        "schema_version": SCHEMA_VERSION,
        "session_id": session_id,
        "trajectory_id": session_id,
        "agent": agent,
        "steps": steps,
        "notes": NOTES,
        "final_metrics": final_metrics(entry, len(steps)),
        "extra": {"disposition": disposition, **{k: v for k, v in entry.items() if k != "conversations"}},
    }
    if subagents:
        out["subagent_trajectories"] = subagents
    return out


def _steps(messages: list[dict], metrics: list[dict], session_id: str, version: str) -> tuple[list[dict], list[dict]]:
    """(steps, embedded subagent trajectories) of OpenAI-style messages."""
    steps: list[dict] = []
    subagents: list[dict] = []
    n_agent = 0
    for m in messages:
        if m["role"] == "tool":
            prev = steps[-1] if steps and steps[-1]["source"] == "agent" else None
            if prev is None:  # a result no agent step asked for: kept in a system step of its own
                prev = {"step_id": len(steps) + 1, "source": "system", "message": ""}
                steps.append(prev)
            result, sub = _result(m, prev, session_id, version)
            prev.setdefault("observation", {"results": []})["results"].append(result)
            if sub:
                subagents.append(sub)
            continue
        step: dict = {"step_id": len(steps) + 1, "source": SOURCES[m["role"]], "message": m.get("content") or ""}
        if m["role"] == "assistant":
            if m.get("reasoning_content"):
                step["reasoning_content"] = m["reasoning_content"]
            if m.get("tool_calls"):
                step["tool_calls"] = [
                    {
                        "tool_call_id": c["id"],
                        "function_name": c["function"]["name"],
                        "arguments": parsed_args(c["function"]["arguments"]),
                    }
                    for c in m["tool_calls"]
                ]
            if n_agent < len(metrics):
                step["metrics"], step["llm_call_count"] = metrics[n_agent], 1
            n_agent += 1
        steps.append(step)
    return steps, subagents


def _result(m: dict, step: dict, session_id: str, version: str) -> tuple[dict, dict | None]:
    """(observation result, subagent trajectory or None) of one tool message answering `step`."""
    cid = m.get("tool_call_id") or ""
    call = next((c for c in step.get("tool_calls") or [] if c["tool_call_id"] == cid), None)
    result: dict = {"content": m.get("content") or ""}
    if call is None:  # not one of the step's calls: no source_call_id (ATIF requires it to match one)
        result["extra"] = {"tool_call_id": cid, "name": m.get("name") or ""}
        return result, None
    result["source_call_id"] = cid
    sub = subagent(call, result["content"], f"{session_id}#{cid}", session_id, version)
    if sub:
        result["subagent_trajectory_ref"] = [
            {"trajectory_id": sub["trajectory_id"], "session_id": session_id, "extra": {"tool": call["function_name"]}}
        ]
    return result, sub


def subagent(call: dict, content: str, trajectory_id: str, session_id: str, version: str) -> dict | None:
    """The embedded trajectory of a tool call that ran a model (SUBAGENT_TOOLS) and answered; else None."""
    if call["function_name"] not in SUBAGENT_TOOLS:
        return None
    question_key, answer_key, notes = SUBAGENT_TOOLS[call["function_name"]]
    try:
        out = json.loads(content)
    except json.JSONDecodeError:
        return None
    if not isinstance(out, dict) or not out.get("success") or not isinstance(out.get(answer_key), str):
        return None
    used = out.get("models_used") if isinstance(out.get("models_used"), dict) else {}
    agent: dict = {"name": f"{AGENT_NAME}/{call['function_name']}", "version": version}
    if used.get("aggregator_model"):
        agent["model_name"] = str(used["aggregator_model"])
    if used.get("reference_models"):
        agent["extra"] = {"reference_models": list(used["reference_models"])}
    question = call["arguments"].get(question_key)
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": session_id,
        "trajectory_id": trajectory_id,
        "agent": agent,
        "steps": [
            {"step_id": 1, "source": "user", "message": question if isinstance(question, str) else ""},
            {"step_id": 2, "source": "agent", "message": out[answer_key]},
        ],
        "notes": notes,
        "extra": {"tool_call_id": call["tool_call_id"], **{k: v for k, v in out.items() if k != answer_key}},
    }


def step_metrics(timeline: list[dict] | None, n_agent_steps: int) -> list[dict]:
    """ATIF metrics of each agent step from the timeline's answered model calls, in order; [] when their number
    is not that of the agent steps (no timeline, or steps that were no model call): no step gets another's."""
    answered = [c for c in timeline or [] if c.get("k") == "model" and "error" not in c]
    if not answered or len(answered) != n_agent_steps:
        return []
    out = []
    for c in answered:
        extra = {"duration_s": c.get("dur"), "retries": c.get("retries"), "finish_reason": c.get("finish")}
        if c.get("cached"):
            extra["replayed_from_cache"] = True
        out.append(
            {
                "prompt_tokens": int(c.get("in") or 0),
                "completion_tokens": int(c.get("out") or 0),
                "extra": {k: v for k, v in extra.items() if v is not None},
            }
        )
    return out


def final_metrics(entry: dict, n_steps: int) -> dict:
    """Totals of the entry's usage; the cost only when known (a price table or the provider gave one)."""
    usage = entry.get("usage") or {}
    out: dict = {
        "total_prompt_tokens": int(usage.get("prompt_tokens") or 0),
        "total_completion_tokens": int(usage.get("completion_tokens") or 0),
        "total_cached_tokens": int(usage.get("cached_tokens") or 0),
        "total_steps": n_steps,
        "extra": {
            "total_tokens": int(usage.get("total_tokens") or 0),
            "reasoning_tokens": int(usage.get("reasoning_tokens") or 0),
            "api_calls": int(entry.get("api_calls") or 0),
        },
    }
    if usage.get("cost_usd"):
        out["total_cost_usd"] = float(usage["cost_usd"])
    return out
