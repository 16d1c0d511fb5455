"""Jinja templates of the scorers (verify commands, judge rubrics): the shared sandboxed environment
(hermes_runner/config/templating.py), strict about undefined names."""

from __future__ import annotations

from hermes_runner.config.templating import compile_template
from hermes_runner.config.templating import render as render_template
from hermes_runner.errors import ScoreError, TemplateRefused


def render(text: str, where: str, **values: object) -> str:
    import jinja2

    try:
        return render_template(compile_template(text, where), where, values)
    except jinja2.UndefinedError as exc:
        raise ScoreError(f"{where}: {exc.message}") from None
    except TemplateRefused as exc:
        raise ScoreError(str(exc)) from None
