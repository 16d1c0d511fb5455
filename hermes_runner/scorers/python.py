"""`python`: your own check, any callable named by `_target_`: `fn(entry, row, **args) -> float | dict`.

A dict holds `value` (or `score`), optionally `passed` and `explanation`; its other keys go to `details`.
A class is instantiated with `args` and its instance called with (entry, row). Async callables are awaited;
plain ones run in a worker thread (a slow check does not stall the other prompts)."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
from pathlib import Path

from hydra.utils import get_object

from hermes_runner.config import ScorerConfig, ScorerKind
from hermes_runner.errors import ConfigError, ScoreError
from hermes_runner.scorers.base import BuiltinScorer, Job, Score, finite


def load_callable(path: str, args: dict, where: str):
    """The callable `path` names (with `args` bound), or ConfigError."""
    try:
        obj = get_object(path)
    except Exception as exc:  # noqa: BLE001 - hydra raises ImportError or plain Exception
        raise ConfigError(f"{where}._target_={path!r} cannot be imported: {exc}") from None
    if inspect.isclass(obj):
        return obj(**args)
    if not callable(obj):
        raise ConfigError(f"{where}._target_={path!r} is not callable")
    return (lambda entry, row: obj(entry, row, **args)) if args else obj


def code_version(path: str) -> str | None:
    """The sha256 of the source file that defines the callable `path` names (the version of a python scorer's
    code, for the rows' provenance); None when it has no readable source."""
    try:
        obj = get_object(path)
        source = inspect.getsourcefile(obj if inspect.isroutine(obj) or inspect.isclass(obj) else type(obj))
        return hashlib.sha256(Path(source).read_bytes()).hexdigest() if source else None
    except Exception:  # noqa: BLE001 - an unimportable target is reported when the scorer opens
        return None


class PythonScorer(BuiltinScorer):
    kind = ScorerKind.python

    def __init__(self, name: str, cfg: ScorerConfig):
        super().__init__(name, cfg)
        self.fn = load_callable(cfg._target_ or "", dict(cfg.args), f"scorers.{name}")
        target = getattr(self.fn, "__call__", self.fn)  # noqa: B004 - an instance's own __call__
        self.is_async = inspect.iscoroutinefunction(self.fn) or inspect.iscoroutinefunction(target)

    async def score(self, job: Job) -> Score:
        if self.is_async:
            out = await self.fn(job.entry, job.row)
        else:
            out = await asyncio.to_thread(self.fn, job.entry, job.row)
            if inspect.isawaitable(out):
                out = await out
        return self.record(out)

    def record(self, out: object) -> Score:
        what = f"{self.cfg._target_} returned"
        if not isinstance(out, dict):
            return self.scored(finite(out, what))
        out = dict(out)
        if "value" not in out and "score" not in out:
            raise ScoreError(f"{what} a dict without `value`: {sorted(out)}")
        value = finite(out.pop("value", None) if "value" in out else out.pop("score"), f"{what} value")
        passed = out.pop("passed", None)
        passed = value >= self.cfg.pass_threshold if passed is None else bool(passed)
        why = str(out.pop("explanation", "") or "")
        details = json.dumps(out, ensure_ascii=False, sort_keys=True, default=str)
        return Score(self.name, self.kind.value, value, passed, why, details=details)
