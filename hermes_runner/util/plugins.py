"""Backends by name: each family keeps a name -> "module:attr" map; a user's own is given by its import path."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from hermes_runner.errors import ConfigError


def load(name: str, mapping: Mapping[str, str], option: str) -> Any:
    """What `name` stands for: a name of `mapping`, else a user's "package.module:Class" (or "package.module.Class");
    a name that is neither, or a path that does not load, is a ConfigError naming the option and the known names."""
    if name in mapping:
        module, _, attr = mapping[name].partition(":")
        return getattr(importlib.import_module(module), attr)  # ours: an ImportError is a missing extra, said as is
    module, _, attr = name.rpartition(":" if ":" in name else ".")
    if not module:
        known = ", ".join(mapping)
        raise ConfigError(f"unknown {option} {name!r} (known: {known}; or a class of yours as package.module:Class)")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"{option}={name!r} cannot be loaded: {exc}") from None
