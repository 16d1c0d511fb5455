"""The prefill messages file: a JSON list of {role, content} messages sent after the system prompt."""

from __future__ import annotations

from pathlib import Path

from hermes_runner.dataset.base import parse_json
from hermes_runner.errors import ConfigError


def load_prefill(path: str | None) -> list[dict]:
    """The prefill messages file: a JSON list of {role, content} messages (none without a path)."""
    if not path:
        return []
    if Path(path).is_dir():
        raise ConfigError(f"prefill_messages_file is a directory, not a JSON file: {path}")
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"prefill_messages_file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"prefill_messages_file {path} cannot be read: {exc.strerror or exc}") from None
    data, reason = parse_json(raw)
    if reason:
        raise ConfigError(f"prefill_messages_file {path} is unusable: {reason}")
    if not isinstance(data, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in data
    ):
        raise ConfigError(f"prefill_messages_file {path} must hold a JSON list of {{role, content}} messages")
    return data
