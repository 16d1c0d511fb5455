"""The `moa` toolset: Mixture-of-Agents, several reference models answer and an aggregator combines them."""

from __future__ import annotations

import asyncio
import time

from hermes_runner.errors import ModelCallError
from hermes_runner.model.base import ChatModel
from hermes_runner.tools.base import ToolContext, ToolResult, params, text_arg, tool
from hermes_runner.usage import Usage

AGGREGATOR_PROMPT = (
    "You have been given answers from several models to the user's latest question. Combine them into "
    "one answer of the highest quality. Judge them critically: some of what they say may be biased or "
    "wrong. Do not just repeat them; give a refined, accurate and complete reply that is well structured "
    "and coherent.\n\nAnswers from the models:"
)


async def _ask(label: str, model: ChatModel, messages: list[dict], usage: Usage) -> tuple[str, str | None, str | None]:
    """(label, answer, error); the call's spend is added to `usage`."""
    try:
        reply = await model.complete(messages, [])
    except ModelCallError as exc:
        return label, None, str(exc)
    usage.add(reply.usage)
    content = (reply.message.get("content") or "").strip() or (reply.message.get("reasoning") or "").strip()
    return (label, content, None) if content else (label, None, "empty answer")


@tool(
    "moa",
    "mixture_of_agents",
    "Route a hard problem through several language models that answer independently, then an "
    "aggregator model combines their answers into one. Use it sparingly, for genuinely difficult "
    "problems: complex math, advanced algorithms, multi-step analytical reasoning.",
    params(
        "user_prompt",
        user_prompt={
            "type": "string",
            "description": "The complex question or problem to solve, with all the context the models need.",
        },
    ),
)
async def mixture_of_agents(ctx: ToolContext, args: dict) -> ToolResult:
    svc = ctx.service("moa")
    question = text_arg(args, "user_prompt")
    started = time.monotonic()
    user = [{"role": "user", "content": question.strip()}]
    answers = await asyncio.gather(*(_ask(label, model, user, ctx.usage) for label, model in svc.references))
    good = [(label, text) for label, text, _ in answers if text]
    failed = {label: err for label, _, err in answers if err}
    used = {"reference_models": [label for label, _ in svc.references], "aggregator_model": svc.aggregator[0]}
    if len(good) < svc.cfg.min_successful:
        detail = "; ".join(f"{k}: {v}" for k, v in failed.items())
        return ToolResult.of(
            {
                "success": False,
                "error": f"only {len(good)} of {len(answers)} reference models answered "
                f"(need {svc.cfg.min_successful}): {detail}",
                "models_used": used,
            },
            ok=False,
        )
    numbered = "\n".join(f"{i}. {text}" for i, (_, text) in enumerate(good, 1))
    messages = [{"role": "system", "content": f"{AGGREGATOR_PROMPT}\n\n{numbered}"}] + user
    label, final, error = await _ask(svc.aggregator[0], svc.aggregator[1], messages, ctx.usage)
    if final is None:
        return ToolResult.of({"success": False, "error": f"aggregator {label}: {error}", "models_used": used}, ok=False)
    out = {
        "success": True,
        "response": final,
        "models_used": used,
        "processing_time_s": round(time.monotonic() - started, 3),
    }
    if failed:
        out["failed_models"] = failed
    return ToolResult.of(out)
