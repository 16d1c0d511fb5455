"""The checks of a composed config, run before any side effect: unknown keys, value rules, templates."""

from __future__ import annotations

import dataclasses
import difflib
from typing import TYPE_CHECKING

from omegaconf import DictConfig, ListConfig, OmegaConf

from hermes_runner.config.execution import ExecutorKind
from hermes_runner.config.scorers import ScorerConfig, ScorerKind
from hermes_runner.errors import ConfigError

if TYPE_CHECKING:
    from hermes_runner.config.root import RunConfig


# Value rules of numeric options: (dotted key, rule). A key whose value is null passes (it means "no limit"
# or "default"); `*` is each element of a list.
_POSITIVE, _NON_NEGATIVE, _AT_LEAST_1 = "> 0", ">= 0", ">= 1"
_ENDPOINT_RULES = (("timeout_s", _POSITIVE), ("max_retries", _NON_NEGATIVE), ("max_tokens", _AT_LEAST_1))
VALUE_RULES: tuple[tuple[str, str], ...] = (
    ("batch_size", _AT_LEAST_1),
    ("num_workers", _AT_LEAST_1),
    ("max_turns", _AT_LEAST_1),
    ("max_samples", _AT_LEAST_1),
    ("samples_per_prompt", _AT_LEAST_1),
    ("retry.max_attempts", _AT_LEAST_1),
    ("retry.initial_wait_s", _NON_NEGATIVE),
    ("retry.max_wait_s", _NON_NEGATIVE),
    ("max_tokens", _AT_LEAST_1),
    ("max_invalid_tool_turns", _AT_LEAST_1),
    ("log_prefix_chars", _NON_NEGATIVE),
    ("fsync_interval_s", _POSITIVE),
    ("progress_interval_s", _POSITIVE),
    ("progress_every_percent", _NON_NEGATIVE),
    ("shard.count", _AT_LEAST_1),
    ("shard.index", _NON_NEGATIVE),
    ("limits.max_cost_usd", _POSITIVE),
    ("limits.max_tokens_total", _AT_LEAST_1),
    ("limits.prompt_max_tokens", _AT_LEAST_1),
    ("limits.prompt_max_cost_usd", _POSITIVE),
    ("limits.timeout_s", _POSITIVE),
    ("cache.size_limit", _AT_LEAST_1),
    ("cache.expire", _POSITIVE),
    ("model.timeout_s", _POSITIVE),
    ("model.max_retries", _NON_NEGATIVE),
    ("model.refused_retries", _NON_NEGATIVE),
    ("model.retry_initial_wait_s", _NON_NEGATIVE),
    ("model.retry_max_wait_s", _NON_NEGATIVE),
    ("model.tool_choice_turns", _NON_NEGATIVE),
    ("model.serve.port", _NON_NEGATIVE),
    ("model.serve.startup_timeout_s", _POSITIVE),
    ("model.serve.stop_timeout_s", _NON_NEGATIVE),
    ("model.price.prompt_per_mtok", _NON_NEGATIVE),
    ("model.price.completion_per_mtok", _NON_NEGATIVE),
    ("model.price.cached_prompt_per_mtok", _NON_NEGATIVE),
    ("model.rate_limit.requests_per_minute", _POSITIVE),
    ("model.rate_limit.tokens_per_minute", _POSITIVE),
    ("model.rate_limit.min_concurrency", _AT_LEAST_1),
    ("reasoning.max_tokens", _AT_LEAST_1),
    ("sandbox.command_timeout_s", _POSITIVE),
    ("sandbox.max_output_chars", _AT_LEAST_1),
    ("sandbox.local.pids_limit", _NON_NEGATIVE),
    ("sandbox.local.cpus", _NON_NEGATIVE),
    ("sandbox.docker.cpus", _POSITIVE),
    ("sandbox.docker.pids_limit", _AT_LEAST_1),
    ("sandbox.docker.pool_size", _NON_NEGATIVE),
    ("sandbox.docker.max_lifetime_s", _AT_LEAST_1),
    ("executor.num_cpus", _AT_LEAST_1),
    ("executor.sessions_per_worker", _AT_LEAST_1),
    ("executor.cpus_per_worker", _POSITIVE),
    ("executor.max_redispatch", _NON_NEGATIVE),
    ("executor.processes", _NON_NEGATIVE),
    ("tools.fetch.timeout_s", _POSITIVE),
    ("tools.fetch.max_bytes", _AT_LEAST_1),
    ("tools.fetch.max_redirects", _NON_NEGATIVE),
    ("tools.web.search_timeout_s", _POSITIVE),
    ("tools.web.max_urls", _AT_LEAST_1),
    ("tools.web.char_limit", _AT_LEAST_1),
    ("tools.web.max_char_limit", _AT_LEAST_1),
    ("tools.web.call_char_budget", _AT_LEAST_1),
    ("tools.code_execution.timeout_s", _POSITIVE),
    ("tools.code_execution.max_timeout_s", _POSITIVE),
    ("tools.code_execution.max_stderr_chars", _NON_NEGATIVE),
    ("tools.code_execution.max_result_chars", _NON_NEGATIVE),
    ("tools.vision.max_image_bytes", _AT_LEAST_1),
    ("tools.moa.min_successful", _AT_LEAST_1),
    ("tools.browser.viewport_width", _AT_LEAST_1),
    ("tools.browser.viewport_height", _AT_LEAST_1),
    ("tools.browser.navigation_timeout_s", _POSITIVE),
    ("tools.browser.action_timeout_s", _POSITIVE),
    ("tools.browser.snapshot_max_chars", _AT_LEAST_1),
    ("tools.browser.full_snapshot_max_chars", _AT_LEAST_1),
    *((f"tools.vision.endpoint.{k}", r) for k, r in _ENDPOINT_RULES),
    *((f"tools.image_gen.endpoint.{k}", r) for k, r in _ENDPOINT_RULES),
    *((f"tools.moa.aggregator.{k}", r) for k, r in _ENDPOINT_RULES),
    *((f"tools.moa.reference_models.*.{k}", r) for k, r in _ENDPOINT_RULES),
)
_TESTS = {_POSITIVE: lambda v: v > 0, _NON_NEGATIVE: lambda v: v >= 0, _AT_LEAST_1: lambda v: v >= 1}


def _values(obj: object, path: list[str], prefix: str = "") -> list[tuple[str, object, bool]]:
    """(full key, value, may be null) of a dotted path in a config object; `*` goes through a list."""
    head, rest = path[0], path[1:]
    if head == "*":
        return [v for i, item in enumerate(obj or []) for v in _values(item, rest, f"{prefix}[{i}]")]
    full = f"{prefix}.{head}" if prefix else head
    if rest:
        return _values(getattr(obj, head), rest, full)
    types = {f.name: str(f.type) for f in dataclasses.fields(obj)}
    return [(full, getattr(obj, head), "None" in types[head])]


def run_name_problem(name: object) -> str | None:
    """Why `run_name` cannot name a run's directory under the output root (outputs/<run_name>), or None."""
    name = str(name)
    if not name.strip():
        return "run_name is empty: name the run (outputs/<run_name> is its directory)"
    if "/" in name or name in (".", "..") or any(ord(c) < 32 or c == "\x7f" for c in name):
        return (
            f"run_name {name!r} is not a plain directory name: it names outputs/<run_name>, so no /, no control "
            "characters, not . or .. (to write elsewhere, set hydra.run.dir=<path>)"
        )
    return None


def check(cfg: RunConfig) -> None:
    """Check every value rule before anything is created or started; raise ConfigError naming the keys."""
    problems = []
    for key, rule in VALUE_RULES:
        for full, value, nullable in _values(cfg, key.split(".")):
            if value is not None and not isinstance(value, bool) and not _TESTS[rule](value):
                problems.append(f"{full} must be {rule}{' (or null)' if nullable else ''}, not {value}")
    if cfg.executor.backend != ExecutorKind.local and cfg.executor.processes not in (None, 0, 1):
        problems.append(f"executor.processes={cfg.executor.processes} applies to executor=local only (Ray has actors)")
    if (why := run_name_problem(cfg.run_name)) is not None:
        problems.append(why)
    if cfg.shard.count >= 1 and cfg.shard.index >= cfg.shard.count:
        problems.append(f"shard.index must be in [0, shard.count), got {cfg.shard.index}/{cfg.shard.count}")
    problems += _template_problems(cfg.dataset.prompt_template)
    problems += check_scorers(cfg.scorers)
    if cfg.filters.min_reward is not None and not cfg.scorers:
        problems.append(
            "filters.min_reward needs a scorer (scorers is empty: add one, e.g. +scorer@scorers.match=match)"
        )
    if problems:
        raise ConfigError("invalid configuration: " + "; ".join(problems))


def check_scorers(scorers: dict[str, ScorerConfig]) -> list[str]:
    """The problems of a `scorers` mapping (names, one primary, each kind's own options)."""
    import re

    problems = []
    if sum(s.primary for s in scorers.values()) > 1:
        names = ", ".join(n for n, s in scorers.items() if s.primary)
        problems.append(f"scorers: at most one scorer may be primary ({names} are)")
    for name, s in scorers.items():
        where = f"scorers.{name}"
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            problems.append(f"{where}: a scorer's name is letters, digits, _ . - only")
        if s.kind == ScorerKind.verify:
            if s.verify.timeout_s <= 0:
                problems.append(f"{where}.verify.timeout_s must be > 0, not {s.verify.timeout_s}")
            if s.verify.max_output_chars < 0:
                problems.append(f"{where}.verify.max_output_chars must be >= 0, not {s.verify.max_output_chars}")
            problems += _template_problem(s.verify.command, f"{where}.verify.command")
        elif s.kind == ScorerKind.match:
            m = s.match
            if m.abs_tolerance < 0 or m.rel_tolerance < 0:
                problems.append(f"{where}.match: abs_tolerance and rel_tolerance must be >= 0")
            if m.answer_pattern is not None:
                try:
                    re.compile(m.answer_pattern)
                except re.error as exc:
                    problems.append(f"{where}.match.answer_pattern is not a regular expression: {exc}")
        elif s.kind == ScorerKind.judge:
            ep = s.judge.endpoint
            if ep.timeout_s <= 0 or ep.max_retries < 0 or (ep.max_tokens is not None and ep.max_tokens < 1):
                problems.append(f"{where}.judge.endpoint: timeout_s > 0, max_retries >= 0, max_tokens >= 1")
            if s.judge.max_conversation_chars < 1:
                problems.append(f"{where}.judge.max_conversation_chars must be >= 1")
            problems += _template_problem(s.judge.rubric, f"{where}.judge.rubric")
        elif s.kind == ScorerKind.python and not s._target_:
            problems.append(f"{where}._target_ must name a callable fn(entry, row) (kind python)")
    return problems


def _template_problem(text: str | None, where: str) -> list[str]:
    """[why] when `text` is not a valid template for the shared sandboxed environment (templating.py), else []."""
    from hermes_runner.config.templating import problems  # here: runs without a template do not pay jinja2's import

    return problems(text, where) if text else []


def _template_problems(template: str | None) -> list[str]:
    """A prompt_template that is not valid Jinja2, said with its line."""
    if template is None:
        return []
    if not template.strip():
        return ["dataset.prompt_template is empty (null: the prompt column as it is)"]
    import jinja2

    from hermes_runner.config.templating import environment

    try:
        environment().parse(template)
    except jinja2.TemplateSyntaxError as exc:
        return [f"dataset.prompt_template is not a valid Jinja2 template (line {exc.lineno}: {exc.message})"]
    return _template_problem(template, "dataset.prompt_template")


def closest(key: str, names: list[str]) -> str | None:
    """The valid name closest to a mistyped one (difflib, or one it begins), if any is close."""
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
    return close[0] if close else next((n for n in names if n.startswith(key)), None)


def check_keys(dcfg: DictConfig) -> None:
    """Refuse keys no schema defines, e.g. added with `+num_worker=8`: Hydra applies `+key=value` with the
    struct flag off (it may add any key, also to a structured config), so only this walk catches a typo.
    A top-level `hydra` node (in a callback's config) is Hydra's own."""
    unknown = []

    def walk(node: DictConfig | ListConfig, prefix: str) -> None:
        if isinstance(node, ListConfig):
            for i in range(len(node)):
                child = node._get_node(i)
                if isinstance(child, (DictConfig, ListConfig)):
                    walk(child, f"{prefix}[{i}]")
            return
        schema = OmegaConf.get_type(node)
        names = [f.name for f in dataclasses.fields(schema)] if dataclasses.is_dataclass(schema) else None
        for key in node:
            full = f"{prefix}.{key}" if prefix else str(key)
            if full == "hydra":
                continue
            if names is not None and key not in names:
                close = closest(str(key), names)
                where = f"in {prefix}" if prefix else "at the top level"
                unknown.append(f"{full} (no such option {where}" + (f"; did you mean {close}?)" if close else ")"))
                continue
            child = node._get_node(key)
            if isinstance(child, (DictConfig, ListConfig)):
                walk(child, full)

    walk(dcfg, "")
    if unknown:
        raise ConfigError("unknown option: " + ", ".join(unknown))
