"""Discard reasons, the override that keeps each, and the warning of a run that kept nothing."""

from __future__ import annotations

from hermes_runner.errors import ExitCode

# discard reason -> the override that keeps such trajectories
KEEP_OVERRIDE = {
    "no_reasoning": "filters.require_reasoning=false",
    "hallucinated_tool": "filters.hallucinated_tools=keep",
}
NOTHING_KEPT = ExitCode.NOTHING_KEPT  # exit code of a run that ran prompts and kept none of them


def nothing_kept(stats: dict) -> str | None:
    """None if the run kept a trajectory or discarded none; else what discarded them all and how to keep them."""
    prompts, reasons = stats["prompts"], stats["discarded_by_reason"]
    if prompts["ok"] or not prompts["discarded"] or not reasons:
        return None
    reason, count = max(reasons.items(), key=lambda kv: kv[1])
    fix = KEEP_OVERRIDE.get(reason)
    return (
        f"NOTHING KEPT: all {prompts['discarded']} finished trajectories were discarded, "
        f"{count} of them as {reason}"
        + (f"; rerun with {fix} to keep them" if fix else "")
        + " (the discarded ones are in discarded.jsonl)."
    )
