"""Jinja templates of the scorers (verify commands, judge rubrics): strict about undefined names."""

from __future__ import annotations

import shlex
from functools import lru_cache

import jinja2

from hermes_runner.errors import ConfigError, ScoreError

_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
_ENV.filters["quote"] = lambda v: shlex.quote(str(v))


@lru_cache(maxsize=64)
def compile_template(text: str, where: str) -> jinja2.Template:
    try:
        return _ENV.from_string(text)
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"{where} is not a valid template: {exc.message} (line {exc.lineno})") from None


def render(text: str, where: str, **values: object) -> str:
    try:
        return compile_template(text, where).render(**values)
    except jinja2.UndefinedError as exc:
        raise ScoreError(f"{where}: {exc.message}") from None
