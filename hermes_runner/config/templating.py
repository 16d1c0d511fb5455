"""The one Jinja environment of every user-written template (dataset.prompt_template, verify commands, judge
rubrics): sandboxed (jinja2's ImmutableSandboxedEnvironment), strict about undefined names.

A template is checked when the config is (`problems`): a syntax error, or an attribute or item whose name
starts with `__` (`''.__class__`, `cycler.__init__.__globals__`: how a template reaches Python's internals), is
a config error before anything runs. The sandbox refuses those and any other unsafe access at render time
(`TemplateRefused`), whatever way the name was built; a row's own column `_id` (`{{ row._id }}`) stays readable. (The report's own HTML templates ship with the package and are not user-written.)
"""

from __future__ import annotations

import shlex
from functools import cache, lru_cache
from typing import TYPE_CHECKING

from hermes_runner.errors import ConfigError, TemplateRefused

if TYPE_CHECKING:
    import jinja2


@cache
def environment() -> jinja2.Environment:
    """The shared sandboxed environment; `| quote` shell-quotes a value (verify commands)."""
    import jinja2  # here: runs without a template do not pay its import
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters["quote"] = lambda v: shlex.quote(str(v))
    return env


def problems(text: str | None, where: str) -> list[str]:
    """[why] when `text` is not a valid template or reaches for a `__` name, else [] (also for no template)."""
    if not text:
        return []
    import jinja2  # here: runs without a template do not pay its import
    from jinja2 import nodes

    try:
        tree = environment().parse(text)
    except jinja2.TemplateSyntaxError as exc:
        return [f"{where} is not a valid Jinja2 template (line {exc.lineno}: {exc.message})"]
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        name = node.attr if isinstance(node, nodes.Getattr) else getattr(node.arg, "value", None)
        if isinstance(name, str) and name.startswith("__"):
            return [
                f"{where} (line {node.lineno}) reads {name!r}: a template may not use names that start with __ "
                "(templates are sandboxed; use the row's fields, e.g. {{ row.field }})"
            ]
    return []


@lru_cache(maxsize=64)
def compile_template(text: str, where: str) -> jinja2.Template:
    """The template in the shared environment (ConfigError: not valid, or reaching for `__` names)."""
    if found := problems(text, where):
        raise ConfigError(found[0])
    return environment().from_string(text)


def render(template: jinja2.Template, where: str, values: dict) -> str:
    """Render; TemplateRefused when the sandbox refuses what the template does (jinja2's own errors pass)."""
    from jinja2.sandbox import SecurityError

    try:
        return template.render(**values)
    except SecurityError as exc:
        raise TemplateRefused(f"{where}: refused by the template sandbox: {exc}") from None
