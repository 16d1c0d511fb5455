"""`judge`: an LLM grades the trajectory with a rubric; its reply holds {"score": 0..1, "explanation": ...}.

Its calls go through the run's model-call meters (usage.jsonl, the run budget) and add to the prompt's usage."""

from __future__ import annotations

import json
import re

from hermes_runner.config import ScorerConfig, ScorerKind
from hermes_runner.errors import ModelCallError, ScoreError
from hermes_runner.model.base import ChatModel
from hermes_runner.scorers.base import BuiltinScorer, Job, Score, conversation_text, finite
from hermes_runner.scorers.template import render
from hermes_runner.util.text import clip

_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_verdict(text: str) -> tuple[float, str]:
    """(score, explanation) of a judge's reply: a JSON object, alone or inside other text (or a code fence)."""
    candidates = [text.strip()]
    if m := _OBJECT.search(text):
        candidates.append(m.group(0))
    for raw in candidates:
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and "score" in obj:
            score = finite(obj["score"], "the judge's score")
            if not 0.0 <= score <= 1.0:
                raise ScoreError(f"the judge's score {score:g} is outside [0, 1]")
            return score, str(obj.get("explanation") or "")
    raise ScoreError(f"the judge's reply holds no JSON object with a score: {text[:200]!r}")


class JudgeScorer(BuiltinScorer):
    kind = ScorerKind.judge

    def __init__(self, name: str, cfg: ScorerConfig, model: ChatModel):
        super().__init__(name, cfg)
        self.model = model

    def request(self, job: Job) -> str:
        row = job.row
        dialogue = clip(conversation_text(job.entry), self.cfg.judge.max_conversation_chars)
        return render(
            self.cfg.judge.rubric,
            f"scorers.{self.name}.judge.rubric",
            prompt=row.get("prompt", ""),
            target="" if row.get("target") is None else str(row["target"]),
            answer=job.answer,
            conversation=dialogue,
            row=row,
        )

    async def score(self, job: Job) -> Score:
        try:
            reply = await self.model.complete([{"role": "user", "content": self.request(job)}], [])
        except ModelCallError as exc:
            raise ScoreError(f"the judge's model failed: {exc}") from None
        job.usage.add(reply.usage)  # the prompt's spend (the run budget metered the call itself)
        text = reply.message.get("content") or ""
        value, why = parse_verdict(text)
        details = json.dumps({"model": reply.model, "reply": text[:2000]}, ensure_ascii=False)
        return self.scored(value, why, details=details)

    async def aclose(self) -> None:
        await self.model.aclose()
