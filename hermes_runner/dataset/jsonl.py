"""JSON Lines: one JSON object per line, streamed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from hermes_runner.config import DatasetFormat
from hermes_runner.dataset.base import RawRow, excerpt, parse_json
from hermes_runner.errors import ConfigError

# The first bytes of binary formats a text file is never made of, for "this is not what its name says".
MAGIC = {b"PAR1": "Parquet", b"ARROW1": "Arrow", b"\xff\xff\xff\xff": "an Arrow stream", b"PK\x03\x04": "a zip"}


def sniff_binary(path: Path, fmt: str) -> None:
    """A ConfigError when a text format's file starts like a binary one (a Parquet file named .jsonl, ...)."""
    with path.open("rb") as fp:
        head = fp.read(4096)
    for magic, name in MAGIC.items():
        if head.startswith(magic):
            raise ConfigError(
                f"{path} is not a {fmt} file: it starts like {name} data "
                f"(set dataset.format, or give the file the extension of its format)"
            )
    if b"\x00" in head:
        raise ConfigError(f"{path} is not a {fmt} file: it holds binary data (NUL bytes in its first 4 KiB)")


class JsonlReader:
    format = DatasetFormat.jsonl
    unit = "line"

    def __init__(self, path: Path):
        self.path = path
        sniff_binary(path, "JSONL")

    def columns(self) -> list[str] | None:
        return None

    def rows(self) -> Iterator[RawRow]:
        """Every non-blank line; the stdlib parser, always: orjson reads integers beyond 64 bits as floats,
        which would change those rows' keys."""
        with self.path.open("rb") as fp:
            for lineno, raw in enumerate(fp, 1):
                if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]  # a UTF-8 byte order mark (files saved by some Windows editors)
                if not raw.strip():
                    continue  # blank lines are allowed
                obj, reason = parse_json(raw)
                if reason is None and not isinstance(obj, dict):
                    reason = f"not a JSON object ({type(obj).__name__})"
                if reason:
                    yield RawRow(lineno, None, reason, excerpt(raw))
                else:
                    yield RawRow(lineno, obj)
