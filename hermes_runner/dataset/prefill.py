"""The prefill messages file: a JSON list of {role, content} messages sent after the system prompt."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hermes_runner.dataset.base import parse_json
from hermes_runner.errors import ConfigError

MAX_PREFILL_BYTES = 16 * 2**20  # a prefill file is a few messages; a larger one is refused, not read into memory


def regular_file(path: str | Path, option: str) -> os.stat_result:
    """The stat of `path` when it is a regular file (ConfigError otherwise: missing, a FIFO, a device, a
    directory, ...), found without opening it: a FIFO would block a read, /dev/zero would never end one."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"{option} not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"{option} {path} cannot be read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{option} is a directory, not a JSON file: {path}")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{option} {path} is not a regular file ({file_kind(st.st_mode)}): give a file")
    return st


def file_kind(mode: int) -> str:
    """What a file that is not regular is, in words."""
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def load_prefill(path: str | None) -> list[dict]:
    """The prefill messages file: a JSON list of {role, content} messages (none without a path), at most
    MAX_PREFILL_BYTES."""
    if not path:
        return []
    option = "prefill_messages_file"
    st = regular_file(path, option)
    if st.st_size > MAX_PREFILL_BYTES:
        raise ConfigError(
            f"{option} {path} is {st.st_size:,} bytes, more than the {MAX_PREFILL_BYTES:,} a prefill may be"
        )
    try:
        with open(path, "rb") as fp:
            raw = fp.read(MAX_PREFILL_BYTES + 1)  # (a file that grew since its stat is still not read whole)
    except OSError as exc:
        raise ConfigError(f"{option} {path} cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_PREFILL_BYTES:
        raise ConfigError(f"{option} {path} is more than the {MAX_PREFILL_BYTES:,} bytes a prefill may be")
    data, reason = parse_json(raw)
    if reason:
        raise ConfigError(f"{option} {path} is unusable: {reason}")
    if not isinstance(data, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in data
    ):
        raise ConfigError(f"{option} {path} must hold a JSON list of {{role, content}} messages")
    return data
