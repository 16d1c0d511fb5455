"""Scorers: judge each trajectory and give it a `reward` and one `scores` record per scorer (docs/scoring.md).

One module per kind behind the protocol in `base`; `KINDS` maps a kind to its module. The session runs them
after the conversation, before the prompt's sandbox goes (`verify` needs it); `hermes-score` runs the others
again over a finished run. This room may import the sandbox, model, tools' endpoints and the trajectory format,
never the agent or the run."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping, Sequence

from hermes_runner.config import ModelConfig, ScorerConfig, ScorerKind
from hermes_runner.errors import ScoreError
from hermes_runner.scorers.base import NOT_SCORED, Job, Score, Scorer, final_answer, row_from_entry, row_of
from hermes_runner.telemetry import Trace, genai
from hermes_runner.util.plugins import load

__all__ = [
    "KINDS",
    "NOT_SCORED",
    "Job",
    "Score",
    "Scorer",
    "Scorers",
    "code_versions",
    "final_answer",
    "open_scorers",
    "primary_name",
    "reward_of",
    "row_from_entry",
    "row_of",
    "unscored",
]

log = logging.getLogger(__name__)

# kind -> "module:class" (a new scorer kind is one line here and one module)
KINDS = {
    ScorerKind.verify: "hermes_runner.scorers.verify:VerifyScorer",
    ScorerKind.match: "hermes_runner.scorers.match:MatchScorer",
    ScorerKind.judge: "hermes_runner.scorers.judge:JudgeScorer",
    ScorerKind.python: "hermes_runner.scorers.python:PythonScorer",
}


def scorer_class(kind: ScorerKind) -> type:
    return load(kind, KINDS, "scorer kind")


def code_versions(scorers: Mapping[str, ScorerConfig]) -> dict[str, str]:
    """Scorer name -> the sha256 of its own code's source file, for the scorers whose code is the user's (python);
    the built-in kinds' code is the runner's, whose version the invocation records."""
    from hermes_runner.scorers.python import code_version

    found = {n: code_version(c._target_ or "") for n, c in scorers.items() if c.kind == ScorerKind.python}
    return {n: v for n, v in found.items() if v}


def primary_name(scorers: Mapping[str, ScorerConfig]) -> str | None:
    """The scorer whose value is the reward: the one marked primary, else the first."""
    for name, s in scorers.items():
        if s.primary:
            return name
    return next(iter(scorers), None)


def reward_of(scores: Sequence[Score | dict], primary: str | None) -> float:
    """The primary scorer's value (0.0 when it did not score, or there is none)."""
    for s in scores:
        d = s.as_dict() if isinstance(s, Score) else s
        if d["name"] == primary:
            return float(d["value"])
    return 0.0


def unscored(scorers: Mapping[str, ScorerConfig]) -> list[dict]:
    """The records of rows no scorer judged: one per configured scorer, `error: "not scored"`."""
    return [Score.failed(name, s.kind, NOT_SCORED).as_dict() for name, s in scorers.items()]


class Scorers:
    """The configured scorers of a run, in their configured order."""

    def __init__(self, configs: Mapping[str, ScorerConfig], scorers: Sequence[Scorer]):
        self.configs = dict(configs)
        self.items = list(scorers)
        self.primary = primary_name(self.configs)

    def __bool__(self) -> bool:
        return bool(self.items)

    async def score(self, job: Job, trace: Trace | None = None) -> list[Score]:
        """Every scorer's record, each a span of `trace`; one that raises gets a record with its error (value 0,
        not passed)."""
        trace = trace or Trace()
        out = []
        for s in self.items:
            with trace.span(f"evaluate {s.name}", genai.scorer(s.name, getattr(s.kind, "value", str(s.kind)))) as span:
                score = await self._one(s, job)
                span.set(genai.score(score.value, score.passed, score.explanation))
                if score.error:
                    span.fail("score_error", score.error)
            out.append(score)
        return out

    @staticmethod
    async def _one(s: Scorer, job: Job) -> Score:
        try:
            return await s.score(job)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a scorer's failure is a record, the trajectory is kept
            log.debug("scorer %s failed", s.name, exc_info=True)
            return Score.failed(
                s.name, s.kind, str(exc) if isinstance(exc, ScoreError) else f"{type(exc).__name__}: {exc}"
            )

    def ordered(self, scores: Sequence[Score]) -> list[dict]:
        """The records as entries hold them: the primary scorer's first, then the others in configured order."""
        records = [s.as_dict() for s in scores]
        return sorted(records, key=lambda r: r["name"] != self.primary)

    async def aclose(self) -> None:
        for s in self.items:
            await s.aclose()


def open_scorers(
    configs: Mapping[str, ScorerConfig],
    model: ModelConfig,
    main_url: str | None = None,
    hooks: Sequence[object] = (),
    trace: Trace | None = None,
) -> Scorers:
    """Build the scorers of `configs`; a judge's model (the run's `model` by default) meters its calls with `hooks`,
    each a chat span of `trace` (under its scorer's span)."""
    from hermes_runner.tools.backends.endpoints import chat_model, model_config

    trace = trace or Trace()
    built: list[Scorer] = []
    for name, sc in configs.items():
        cls = scorer_class(sc.kind)
        if sc.kind == ScorerKind.judge:
            ep = dataclasses.replace(sc.judge.endpoint, model=sc.judge.endpoint.model or model.name)
            mc = model_config(ep, model, main_url)
            attrs = genai.chat_request(mc.name, mc.base_url, mc.temperature, ep.max_tokens)
            built.append(cls(name, sc, trace.model(chat_model(ep, model, main_url, 8, hooks), attrs)))
        else:
            built.append(cls(name, sc))
    return Scorers(configs, built)
