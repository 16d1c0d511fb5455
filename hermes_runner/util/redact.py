"""Keep secrets the config resolves (``${oc.env:VAR}``, API key variables) out of every file the runner writes.

Which values are secret: those of the environment variables that the unresolved config or the command-line
overrides read with ``oc.env``, and those named by an ``api_key_env`` option. Wherever such a value would be
written (the config in ``invocations.jsonl`` and ``run.json``, log lines, error messages) the interpolation
text ``${oc.env:VAR}`` stands in its place.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable

_OC_ENV = re.compile(r"\$\{oc\.env:\s*([A-Za-z_][A-Za-z0-9_]*)")
MIN_SECRET_CHARS = 6  # shorter values (flags, small numbers) would blank out ordinary text


def _strings(obj: object) -> Iterable[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            yield from _strings(v)


def _key_env_names(obj: object) -> Iterable[str]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, str) and k.endswith("api_key_env") and isinstance(v, str):
                yield v
            else:
                yield from _key_env_names(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            yield from _key_env_names(v)


class Redactor:
    """Replaces secret values with the text that named them."""

    def __init__(self, names: Iterable[str] = (), environ: dict[str, str] | None = None):
        env = os.environ if environ is None else environ
        found: dict[str, str] = {}
        for name in names:
            value = env.get(name)
            if value and len(value) >= MIN_SECRET_CHARS and value not in found:
                found[value] = "${oc.env:" + name + "}"
        self._subs = sorted(found.items(), key=lambda kv: -len(kv[0]))  # longest first
        self._re = re.compile("|".join(re.escape(v) for v, _ in self._subs)) if self._subs else None

    @classmethod
    def from_sources(cls, *sources: object) -> Redactor:
        """From the unresolved config, the overrides (oc.env references) and the resolved config (api_key_env)."""
        names: list[str] = []
        for src in sources:
            names += [m.group(1) for s in _strings(src) for m in _OC_ENV.finditer(s)]
            names += list(_key_env_names(src))
        return cls(dict.fromkeys(names))

    def __bool__(self) -> bool:
        return self._re is not None

    def text(self, s: str) -> str:
        if self._re is None or not s:
            return s
        subs = dict(self._subs)
        return self._re.sub(lambda m: subs[m.group(0)], s)

    def __call__(self, obj: object) -> object:
        """`obj` with every secret in its strings (dict keys included) replaced."""
        if self._re is None:
            return obj
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {self(k): self(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self(v) for v in obj]
        return obj


class RedactingFilter(logging.Filter):
    """A handler filter that writes log records with their secrets replaced."""

    def __init__(self, redactor: Redactor):
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        r = self.redactor
        if r:
            record.msg, record.args = r.text(record.getMessage()), None
            if record.exc_info:
                record.exc_text = r.text(logging.Formatter().formatException(record.exc_info))
                record.exc_info = None
        return True


class redacting_logs:  # noqa: N801 - used as a context manager
    """Filter every handler of the root logger (and of `hermes_runner`) while the run goes on."""

    def __init__(self, redactor: Redactor):
        self.filter = RedactingFilter(redactor)
        self.handlers: list[logging.Handler] = []

    def __enter__(self) -> redacting_logs:
        if self.filter.redactor:
            for name in (None, "hermes_runner"):
                for h in logging.getLogger(name).handlers:
                    h.addFilter(self.filter)
                    self.handlers.append(h)
        return self

    def __exit__(self, *exc: object) -> None:
        for h in self.handlers:
            h.removeFilter(self.filter)
