"""Conversions of configs: a structured config as plain containers, and a dotted key's value in them."""

import dataclasses
from enum import Enum
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf


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
