"""The scorer interface, the score record every entry carries, and what a scorer sees of a trajectory."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from hermes_runner.config import ScorerConfig, ScorerKind
from hermes_runner.errors import ScoreError
from hermes_runner.trajectory.entry import NOT_SCORED, score_record
from hermes_runner.trajectory.hermes import split_gpt
from hermes_runner.usage import Usage

__all__ = ["NOT_SCORED", "Job", "Score", "Scorer", "conversation_text", "final_answer", "row_from_entry", "row_of"]

if TYPE_CHECKING:
    from hermes_runner.dataset import Prompt
    from hermes_runner.dataset.mapping import Mapping
    from hermes_runner.sandbox.base import Sandbox


@dataclass(slots=True)
class Score:
    """One scorer's judgment of one trajectory: a record of fixed keys and types (`as_dict`)."""

    name: str  # the scorer's key in `scorers`
    kind: str  # verify | match | judge | python
    value: float = 0.0  # the score (verify and match: 0 or 1; judge: 0..1; python: any number)
    passed: bool = False  # value >= the scorer's pass_threshold (or what a python scorer says)
    explanation: str = ""  # why, in words
    error: str = ""  # why there is no real score ("" when scored): the value is then 0 and passed false
    exit_code: int = -1  # verify: the command's exit code (-1: other kinds, or no command ran)
    output: str = ""  # verify: the command's output, clipped
    details: str = "{}"  # JSON text of anything else the scorer reported (a python scorer's extra keys, ...)

    def as_dict(self) -> dict:
        """The record as entries hold it: the keys and types of trajectory.entry.SCORE_TYPES."""
        return score_record({k: getattr(self, k) for k in self.__slots__})

    @classmethod
    def failed(cls, name: str, kind: ScorerKind | str, error: str, **extra: object) -> Score:
        kind = kind.value if isinstance(kind, ScorerKind) else str(kind)
        return cls(name, kind, error=error or "error", **extra)

    @classmethod
    def from_dict(cls, d: dict) -> Score:
        return cls(**{k: d[k] for k in cls.__slots__ if k in d})


@dataclass
class Job:
    """What a scorer judges: a trajectory entry, its dataset row, and (in the run only) its live sandbox."""

    entry: dict  # the trajectory entry (trajectory/entry.py), scores not yet set
    row: dict  # the dataset row: prompt, image, cwd and every other field (target, verify, ...)
    sandbox: Sandbox | None = None  # the prompt's own sandbox; None when rescoring a finished run
    usage: Usage = field(default_factory=Usage)  # the prompt's spend: a judge adds its calls to it

    @property
    def answer(self) -> str:
        return final_answer(self.entry)


class Scorer(Protocol):
    """Judges trajectories; raises ScoreError (or anything) when it cannot, which the record keeps as `error`."""

    name: str
    kind: ScorerKind
    needs_sandbox: bool  # verify: only while the prompt's sandbox is alive

    async def score(self, job: Job) -> Score: ...

    async def aclose(self) -> None: ...


class BuiltinScorer:
    """What the built-in kinds share: name and config, no sandbox needed, nothing to close."""

    kind: ScorerKind
    needs_sandbox = False

    def __init__(self, name: str, cfg: ScorerConfig):
        self.name, self.cfg = name, cfg

    def scored(self, value: float, explanation: str = "", **extra: object) -> Score:
        """The Score of `value`, passed at the scorer's pass_threshold."""
        return Score(self.name, self.kind.value, value, value >= self.cfg.pass_threshold, explanation, **extra)

    async def aclose(self) -> None:
        pass


def row_of(prompt: Prompt) -> dict:
    """The dataset row a scorer reads (the one accessor of `target` / `verify`: they are row fields today)."""
    row = dict(prompt.fields)
    row.update(prompt=prompt.prompt, image=prompt.image or "", cwd=prompt.cwd or "")
    for name in ("target", "verify"):
        if getattr(prompt, name, None) is not None:  # a Prompt that maps them to attributes of their own
            row[name] = getattr(prompt, name)
    return row


def row_from_entry(entry: dict, mapping: Mapping | None = None) -> dict:
    """The dataset row of a finished entry (for rescoring): its kept row fields, prompt, image and cwd, and the
    `target` / `verify` that `mapping` (the run's `dataset.fields`) reads from them."""
    meta = entry.get("metadata") or {}
    try:
        row = json.loads(meta.get("row_fields") or "{}")
    except ValueError:
        row = {}
    row = row if isinstance(row, dict) else {}
    human = next((t.get("value", "") for t in entry.get("conversations") or () if t.get("from") == "human"), "")
    row.update(prompt=human, image=meta.get("image", ""), cwd=meta.get("cwd", ""))
    if mapping is not None:
        row.update(mapping.answers(row))
    return row


def final_answer(entry: dict) -> str:
    """The text of the last assistant turn, without its reasoning and tool calls ("" when there is none)."""
    for turn in reversed(entry.get("conversations") or []):
        if turn.get("from") == "gpt":
            value = turn.get("value") or ""
            _, content = split_gpt(value, 0 if turn.get("tool_calls") else value.count("<tool_call>"))
            return content.strip()
    return ""


def conversation_text(entry: dict) -> str:
    """The dialogue (no system turn) as plain text, for a judge."""
    names = {"human": "User", "gpt": "Assistant", "tool": "Tool"}
    parts = []
    for turn in entry.get("conversations") or []:
        who = turn.get("from")
        if who in names:
            parts.append(f"[{names[who]}]\n{turn.get('value') or ''}")
    return "\n\n".join(parts)


def finite(value: object, what: str) -> float:
    """A score value as a finite float (bool counts as 0/1), or ScoreError."""
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, int | float) or not math.isfinite(float(value)):
        raise ScoreError(f"{what} is {value!r}, not a finite number")
    return float(value)
