"""User-written templates (prompt_template, verify.command, judge.rubric) share one sandboxed environment
(issue 29): a template that reaches for Python's internals is refused by the config check, and at render time."""

from __future__ import annotations

import pytest

from hermes_runner.config import DatasetConfig, ScorerConfig, ScorerKind, check_scorers
from hermes_runner.config.templating import compile_template, environment, problems
from hermes_runner.dataset.mapping import Mapping, RowError
from hermes_runner.errors import ConfigError, ScoreError
from hermes_runner.scorers.template import render
from hermes_runner.scorers.verify import VerifyScorer

ESCAPES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ joiner['__init__'] }}",
]
# the same escapes with the name built at render time: no static check sees them, the sandbox does
BUILT = [
    "{{ cycler | attr('__in' ~ 'it__') }}",
    "{{ ''[('__cla' ~ 'ss__')] }}",
]


def verify(command: str) -> VerifyScorer:
    cfg = ScorerConfig(kind=ScorerKind.verify)
    cfg.verify.command = command
    return VerifyScorer("v", cfg)


@pytest.mark.parametrize("text", ESCAPES)
def test_a_template_that_reaches_for_internals_is_a_config_error(text):
    cfg = ScorerConfig(kind=ScorerKind.verify)
    cfg.verify.command = text
    judge = ScorerConfig(kind=ScorerKind.judge)
    judge.judge.rubric = text
    found = check_scorers({"v": cfg, "j": judge})
    assert len(found) == 2 and all("may not use names that start with __" in p for p in found), found
    assert "scorers.v.verify.command (line 1) reads" in found[0]
    assert "scorers.j.judge.rubric" in found[1]
    with pytest.raises(ConfigError, match="dataset.prompt_template .*start with __"):
        Mapping(DatasetConfig(prompt_template=text))


@pytest.mark.parametrize("text", BUILT)
def test_the_sandbox_refuses_an_escape_built_at_render_time(text):
    assert problems(text, "t") == []  # (statically clean: only the sandbox can tell)
    with pytest.raises(ScoreError, match="refused by the template sandbox.*unsafe"):
        verify(text).command({"x": 1})
    mapping = Mapping(DatasetConfig(prompt_template="task " + text))
    with pytest.raises(RowError, match="dataset.prompt_template: refused by the template sandbox"):
        mapping.prompt({"x": 1}, 0, "k")


def test_every_user_template_is_rendered_by_the_one_sandboxed_environment():
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    assert isinstance(environment(), ImmutableSandboxedEnvironment)
    assert compile_template("{{ a }}", "w").environment is environment()
    assert Mapping(DatasetConfig(prompt_template="{{ a }}")).template.environment is environment()
    assert render("echo {{ row.p | quote }}", "w", row={"p": "a b"}) == "echo 'a b'"
    assert verify("test {{ row.n }} = 3").command({"n": 3}) == "test 3 = 3"
    assert verify("echo {{ row._id }} {{ row['_rev'] }}").command({"_id": 7, "_rev": 2}) == "echo 7 2"  # columns
