"""Conversions of configs: a structured config as plain containers, a dotted key's value in them, sizes."""

import dataclasses
from enum import Enum
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from hermes_runner.errors import ConfigError


def as_container(cfg: object) -> Any:
    """The config as plain dicts and lists (enums as their names), as OmegaConf's `to_container`
    of it would give, without the ~40 ms of building a DictConfig (a run needs it several times)."""
    if dataclasses.is_dataclass(cfg):
        return {f.name: as_container(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
    if isinstance(cfg, Enum):
        return cfg.name
    if isinstance(cfg, DictConfig | ListConfig):
        return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    if isinstance(cfg, dict):
        return {k: as_container(v) for k, v in cfg.items()}
    if isinstance(cfg, list | tuple):
        return [as_container(v) for v in cfg]
    return cfg


def select(container: Any, key: str) -> Any:
    """The value at a dotted key of `as_container`'s output (None where a part is missing or null)."""
    for part in key.split("."):
        if not isinstance(container, dict):
            return None
        container = container.get(part)
    return container


def parse_size(text: str | int | None) -> int:
    """Bytes of "512m", "1g", "2048k", "1000" (None or "" or 0: no limit)."""
    if text is None or text == "" or text == 0:
        return 0
    if isinstance(text, int):
        return text
    s = str(text).strip().lower().removesuffix("b")
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}.get(s[-1:], 1)
    digits = s[:-1] if s[-1:] in "kmgt" else s
    try:
        value = float(digits)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (e.g. 512m, 1g)") from None
    if value < 0:
        raise ValueError(f"a size must not be negative: {text!r}")
    return int(value * mult)


def size_of(value: str | int | None, key: str) -> int:
    """`parse_size` of the option `key` (the config check and the backends read sizes with it): a ConfigError
    naming the key when `value` is not a size."""
    try:
        return parse_size(value)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None
