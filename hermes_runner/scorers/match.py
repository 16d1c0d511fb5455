"""`match`: the final answer against the row's `target` (includes, exact, regex, numeric)."""

from __future__ import annotations

import math
import re

from hermes_runner.config import MatchMode, ScorerConfig, ScorerKind
from hermes_runner.errors import ScoreError
from hermes_runner.scorers.base import BuiltinScorer, Job, Score

# A number as people write it: sign, thousands separators, decimals, exponent (1,234.5  -3  2.5e-3  .5)
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


def normalize(text: str) -> str:
    """Case-folded, with every run of whitespace one space, stripped."""
    return " ".join(text.casefold().split())


def last_number(text: str) -> float | None:
    found = [m.group(0) for m in _NUMBER.finditer(text) if any(c.isdigit() for c in m.group(0))]
    if not found:
        return None
    return float(found[-1].replace(",", ""))


class MatchScorer(BuiltinScorer):
    kind = ScorerKind.match

    def __init__(self, name: str, cfg: ScorerConfig):
        super().__init__(name, cfg)
        self.opts = cfg.match
        self.answer_re = re.compile(self.opts.answer_pattern) if self.opts.answer_pattern else None

    def extract(self, answer: str) -> str:
        """The part of the final answer that is compared (answer_pattern's last match; else all of it)."""
        if self.answer_re is None:
            return answer
        matches = list(self.answer_re.finditer(answer))
        if not matches:
            raise ScoreError(f"the final answer has no match of answer_pattern {self.opts.answer_pattern!r}")
        m = matches[-1]
        return (m.group(1) if m.groups() else m.group(0)).strip()

    def compare(self, answer: str, target: str) -> tuple[bool, str]:
        mode = self.opts.mode
        if mode == MatchMode.includes:
            ok = normalize(target) in normalize(answer)
            return ok, f"target {'found' if ok else 'not found'} in the answer"
        if mode == MatchMode.exact:
            ok = answer.strip() == target.strip()
            return ok, "the answer equals the target" if ok else "the answer differs from the target"
        if mode == MatchMode.regex:
            try:
                pattern = re.compile(target, re.IGNORECASE if self.opts.ignore_case else 0)
            except re.error as exc:
                raise ScoreError(f"target {target!r} is not a regular expression: {exc}") from None
            ok = pattern.search(answer) is not None
            return ok, f"pattern {'found' if ok else 'not found'} in the answer"
        return self._numeric(answer, target)

    def _numeric(self, answer: str, target: str) -> tuple[bool, str]:
        want = last_number(target)
        if want is None:
            raise ScoreError(f"target {target!r} holds no number")
        got = last_number(answer)
        if got is None:
            return False, "the answer holds no number"
        tol = max(self.opts.abs_tolerance, self.opts.rel_tolerance * abs(want))
        ok = math.isclose(got, want, rel_tol=0.0, abs_tol=tol) or got == want
        return ok, f"answer {got:g} vs target {want:g} (tolerance {tol:g})"

    async def score(self, job: Job) -> Score:
        target = job.row.get("target")
        if target is None or (isinstance(target, str) and not target.strip()):
            raise ScoreError("the row has no `target`")
        if not isinstance(target, str | int | float) or isinstance(target, bool):
            raise ScoreError(f"the row's `target` is {type(target).__name__}, not a string or number")
        ok, why = self.compare(self.extract(job.answer), str(target))
        return self.scored(1.0 if ok else 0.0, why)
