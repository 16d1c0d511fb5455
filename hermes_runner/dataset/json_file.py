"""A .json file: a JSON array of objects (streamed, one element at a time), or JSON lines."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

from hermes_runner.config import DatasetFormat
from hermes_runner.dataset.base import MAX_DEPTH, RawRow, check_value, excerpt
from hermes_runner.dataset.jsonl import JsonlReader, sniff_binary
from hermes_runner.errors import ConfigError

CHUNK = 1 << 20  # characters read at a time
_WS = " \t\r\n"


class JsonReader:
    format = DatasetFormat.json
    unit = "row"

    def __init__(self, path: Path):
        self.path = path
        sniff_binary(path, "JSON")
        first = _first_char(path)
        if first == "{":  # JSON lines under a .json name (what `datasets` to_json writes)
            self._lines: JsonlReader | None = JsonlReader(path)
            self.unit = "line"
        elif first == "[":
            self._lines = None
        else:
            shown = repr(first) if first else "nothing"
            raise ConfigError(f"{path} is not a JSON dataset: it starts with {shown}, not [ (an array) or {{ (lines)")

    def columns(self) -> list[str] | None:
        return None

    def rows(self) -> Iterator[RawRow]:
        if self._lines is not None:
            yield from self._lines.rows()
            return
        with self.path.open("r", encoding="utf-8-sig", errors="strict") as fp:
            try:
                yield from _array(fp, self.path)
            except UnicodeDecodeError as exc:
                raise ConfigError(f"{self.path} is not a JSON dataset: not UTF-8 ({exc.reason})") from None


def _first_char(path: Path) -> str:
    with path.open("rb") as fp:
        head = fp.read(4096).lstrip(b"\xef\xbb\xbf").lstrip(_WS.encode())
    return head[:1].decode("latin-1")


def _array(fp: io.TextIOBase, path: Path) -> Iterator[RawRow]:
    """The elements of the top-level array, decoded one by one from a sliding buffer."""
    decoder = json.JSONDecoder()
    buf, pos, eof, n = fp.read(CHUNK), 0, False, 0
    pos = _skip(buf, 0)
    assert buf[pos] == "["
    pos += 1
    expect_value = True
    while True:
        pos = _skip(buf, pos)
        while pos >= len(buf) - 1 and not eof:  # keep one character of lookahead
            more = fp.read(CHUNK)
            eof = not more
            buf, pos = buf[pos:] + more, 0
            pos = _skip(buf, pos)
        if pos >= len(buf):
            raise ConfigError(f"{path} is not a JSON dataset: the array is not closed (the file ends at element {n})")
        ch = buf[pos]
        if ch == "]" and (not expect_value or n == 0):
            return
        if ch == "," and not expect_value:
            pos, expect_value = pos + 1, True
            continue
        if not expect_value:
            raise ConfigError(f"{path} is not a JSON dataset: after element {n}, {ch!r} where , or ] should be")
        while True:
            try:
                obj, end = decoder.raw_decode(buf, pos)
                if end < len(buf) or eof:
                    break
                raise json.JSONDecodeError("the buffer ends here", buf, end)  # a number may go on: read more
            except json.JSONDecodeError as exc:
                if eof:
                    raise ConfigError(f"{path}: element {n + 1} of the array is not JSON: {exc}") from None
                more = fp.read(CHUNK)  # the element may go on past the buffer
                eof = not more
                buf, pos = buf[pos:] + more, 0
            except RecursionError:
                raise ConfigError(f"{path}: element {n + 1} is nested deeper than {MAX_DEPTH} levels") from None
        n += 1
        text = buf[pos:end]
        pos, expect_value = end, False
        reason = check_value(obj) or (None if isinstance(obj, dict) else f"not a JSON object ({type(obj).__name__})")
        yield RawRow(n, None, reason, excerpt(text)) if reason else RawRow(n, obj)
        if pos > CHUNK:
            buf, pos = buf[pos:], 0


def _skip(buf: str, pos: int) -> int:
    while pos < len(buf) and buf[pos] in _WS:
        pos += 1
    return pos
