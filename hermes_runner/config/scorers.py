"""The scorers section: what judges a trajectory, and each kind's options."""

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from omegaconf import MISSING

from hermes_runner.config.check import problems
from hermes_runner.config.templating import problems as template_problems
from hermes_runner.config.tools import EndpointConfig


class ScorerKind(str, Enum):
    """What judges a trajectory (docs/scoring.md)."""

    verify = "verify"  # a shell command in the prompt's own sandbox after the conversation: exit 0 = pass
    match = "match"  # the final answer against the row's `target`
    judge = "judge"  # an LLM judge with a rubric: a score in [0, 1] and an explanation
    python = "python"  # a callable `fn(entry, row) -> float | dict` named by `_target_`


class MatchMode(str, Enum):
    """How `match` compares the final answer with the target."""

    includes = "includes"  # the target appears in the answer (both case- and whitespace-normalized)
    exact = "exact"  # the answer equals the target (surrounding whitespace ignored)
    regex = "regex"  # the target is a regular expression searched in the answer
    numeric = "numeric"  # the answer's last number equals the target's within the tolerances


@dataclass
class VerifyOptions:
    # Jinja template over the row (`{{ row.field }}`, `{{ prompt }}`; `| quote` shell-quotes) used when the row
    # has no `verify` field; null: only rows with a `verify` field are verified (the others score 0, error)
    command: str | None = None
    timeout_s: float = 60.0  # the command's own limit (it runs after the conversation, before the sandbox goes)
    max_output_chars: int = 2_000  # output kept in the score record (40% head, 60% tail)
    workdir: str | None = None  # where it runs (null: the sandbox's working dir)
    RULES = {"timeout_s": "> 0", "max_output_chars": ">= 0"}


@dataclass
class MatchOptions:
    mode: MatchMode = MatchMode.includes
    # a regular expression whose first group (or whole match) is the answer, searched in the final answer
    # (the last match wins), e.g. "Answer: (.+)"; null: the whole final answer
    answer_pattern: str | None = None
    ignore_case: bool = True  # regex mode: case-insensitive search
    abs_tolerance: float = 1e-6  # numeric mode: |answer - target| at most this ...
    rel_tolerance: float = 0.0  # ... or at most this fraction of |target|
    RULES = {"abs_tolerance": ">= 0", "rel_tolerance": ">= 0"}


@dataclass
class JudgeOptions:
    # the judge's endpoint; model null: the run's own model (and its endpoint); base_url null: the run's endpoint
    endpoint: EndpointConfig = field(default_factory=lambda: EndpointConfig(temperature=0.0, max_tokens=512))
    # Jinja template of the judge's request, over `prompt`, `target`, `answer`, `conversation` (the dialogue as
    # text) and `row`; the reply must hold a JSON object {"score": 0..1, "explanation": "..."}
    rubric: str = (
        "You are grading an AI agent's answer to a task.\n\n"
        "Task:\n{{ prompt }}\n\n"
        "{% if target %}Reference answer:\n{{ target }}\n\n{% endif %}"
        "Agent's conversation:\n{{ conversation }}\n\n"
        "Agent's final answer:\n{{ answer }}\n\n"
        "Judge whether the final answer solves the task correctly. Reply with only a JSON object: "
        '{"score": <a number from 0 to 1>, "explanation": "<one or two sentences>"}'
    )
    max_conversation_chars: int = 20_000  # the dialogue shown to the judge (40% head, 60% tail)
    RULES = {"max_conversation_chars": ">= 1"}


@dataclass
class ScorerConfig:
    """One scorer of `scorers` (conf/scorer/*.yaml); the key it has there is its name in `scores`."""

    kind: ScorerKind = MISSING
    primary: bool = False  # this scorer's value is the entry's `reward` (default: the first scorer)
    pass_threshold: float = 1.0  # passed = value >= this (verify and match give 0 or 1)
    verify: VerifyOptions = field(default_factory=VerifyOptions)
    match: MatchOptions = field(default_factory=MatchOptions)
    judge: JudgeOptions = field(default_factory=JudgeOptions)
    _target_: str | None = None  # python: dotted path of `fn(entry, row) -> float | dict` (a class: instantiated)
    args: dict[str, Any] = field(default_factory=dict)  # python: keyword arguments of the call (or of the class)

    def problems(self, where: str) -> list[str]:
        """Each kind's own rules: its templates, its pattern, a python scorer's callable."""
        if self.kind == ScorerKind.verify:
            return template_problems(self.verify.command, f"{where}.verify.command")
        if self.kind == ScorerKind.judge:
            return template_problems(self.judge.rubric, f"{where}.judge.rubric")
        if self.kind == ScorerKind.match and self.match.answer_pattern is not None:
            try:
                re.compile(self.match.answer_pattern)
            except re.error as exc:
                return [f"{where}.match.answer_pattern is not a regular expression: {exc}"]
        if self.kind == ScorerKind.python and not self._target_:
            return [f"{where}._target_ must name a callable fn(entry, row) (kind python)"]
        return []


def scorer_set_problems(scorers: dict[str, ScorerConfig]) -> list[str]:
    """What is wrong with a `scorers` mapping as a whole: more than one primary, a name that is not plain."""
    primary = [n for n, s in scorers.items() if s.primary]
    found = [f"scorers: at most one scorer may be primary ({', '.join(primary)} are)"] if len(primary) > 1 else []
    odd = [n for n in scorers if not re.fullmatch(r"[A-Za-z0-9_.-]+", n)]
    return found + [f"scorers.{n}: a scorer's name is letters, digits, _ . - only" for n in odd]


def with_single(scorers: dict[str, ScorerConfig], scorer: ScorerConfig | None) -> dict[str, ScorerConfig]:
    """`scorers` with the one scorer picked the Hydra way (`scorer=match`) first, named after its kind; as they
    were when none was picked or that name is taken (`single_scorer_problem` says so)."""
    if scorer is None or scorer.kind.value in scorers:
        return scorers
    return {scorer.kind.value: scorer, **scorers}


def single_scorer_problem(scorers: dict[str, ScorerConfig], scorer: ScorerConfig | None) -> str | None:
    """Why `scorer=KIND` cannot join `scorers`: a scorer of that name is there already."""
    if scorer is None or scorer.kind.value not in scorers:
        return None
    name = scorer.kind.value
    return (
        f"scorer={name} and scorers.{name} both name a scorer {name!r}: use scorer=KIND for one scorer, "
        f"+scorer@scorers.NAME=KIND (each its own name) for several"
    )


def check_scorers(scorers: dict[str, ScorerConfig]) -> list[str]:
    """The problems of a `scorers` mapping (names, one primary, each scorer's own options)."""
    return scorer_set_problems(scorers) + problems(scorers, "scorers")
