"""The checks of a composed config, run before any side effect: unknown keys, value rules, templates.

Each section's rules sit beside its fields: `RULES` maps a numeric field to "> 0", ">= 0" or ">= 1" (null passes:
it means "no limit" or "default"), a size to "size" ("512m", "1g": `convert.parse_size`) and a backend's field to
the Enum of its family's names (or a user's import path); a `problems(where)` method says what else is wrong (rules
across fields, templates). `check` runs them for the root and every section below it, also the sections in lists
and dicts.
"""

import dataclasses
import difflib
import re

from omegaconf import DictConfig, ListConfig, OmegaConf

from hermes_runner.config.convert import size_of
from hermes_runner.errors import ConfigError

PATH = re.compile(r"\w[.:]\w")  # package.module:Class or package.module.Class
TESTS = {"> 0": lambda v: v > 0, ">= 0": lambda v: v >= 0, ">= 1": lambda v: v >= 1}


def problems(node: object, where: str = "") -> list[str]:
    """What the rules of a config object and of every section below it find wrong, keys in full from `where`."""
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in problems(v, f"{where}.{k}")]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in problems(v, f"{where}[{i}]")]
    if not dataclasses.is_dataclass(node):
        return []
    found, rules = [], getattr(node, "RULES", {})
    for f in dataclasses.fields(node):
        key, value, rule = f"{where}.{f.name}".lstrip("."), getattr(node, f.name), rules.get(f.name)
        if isinstance(rule, type) and value is not None and value not in list(rule) and not PATH.search(value):
            found.append(f"{key} must be {' | '.join(rule)} or a class of yours (package.module:Class), not {value!r}")
        elif rule == "size" and value is not None:
            try:
                size_of(value, key)
            except ConfigError as exc:
                found.append(str(exc))
        elif isinstance(rule, str) and value is not None and not isinstance(value, bool) and not TESTS[rule](value):
            found.append(f"{key} must be {rule}{' (or null)' if 'None' in str(f.type) else ''}, not {value}")
        found += problems(value, key)
    return found + (node.problems(where) if hasattr(node, "problems") else [])


def check(cfg: object) -> None:
    """Check the root config (`RunConfig`) before anything is created or started; ConfigError names the keys."""
    if found := problems(cfg):
        raise ConfigError("invalid configuration: " + "; ".join(found))


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
        schema = OmegaConf.get_type(node)
        names = [f.name for f in dataclasses.fields(schema)] if dataclasses.is_dataclass(schema) else None
        for key in range(len(node)) if isinstance(node, ListConfig) else node:
            full = f"{prefix}[{key}]" if isinstance(node, ListConfig) else f"{prefix}.{key}" if prefix else str(key)
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
