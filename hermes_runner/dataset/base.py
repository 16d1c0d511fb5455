"""What every dataset reader gives (raw rows, in order) and what the mapping makes of them (prompts)."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from hermes_runner.config import DatasetFormat


@dataclass(slots=True)
class Prompt:
    """One dataset row ready to run."""

    index: int  # position among the good rows of the current dataset
    key: str  # identity (see `prompt_key`): stable across reorders, and across text edits when rows have ids
    prompt: str  # the task text (of an opening message list: its last user message)
    image: str | None = None
    cwd: str | None = None
    fields: dict = field(default_factory=dict)  # every other field of the row
    messages: list[dict] | None = None  # opening user/assistant messages (an Inspect-style `input` list)
    system: str | None = None  # the row's own system message (of its `input` list), after the run's
    target: str | None = None  # the expected answer (`dataset.fields.target`), for scorers
    verify: str | None = None  # a check for scorers (`dataset.fields.verify`)
    digest: str = ""  # hash of what the model is given (text, messages, image, cwd): says a row changed
    sample: int = 0  # which of the row's samples_per_prompt runs this is
    row_key: str = ""  # the row's own key, when this is a sample after the first ("": `key` is the row's)

    def for_sample(self, sample: int) -> Prompt:
        """Sample `sample` of this row, with an identity of its own: the row's key + `~s<sample>`.

        Sample 0 keeps the row's key as it is, so run dirs of one sample per row resume unchanged.
        This is the one place the sample suffix is made (the ledger records `row` and `sample` beside it)."""
        if sample == 0:
            return self
        return dataclasses.replace(self, key=f"{self.key}~s{sample}", sample=sample, row_key=self.key)

    def opening(self) -> list[dict]:
        """The conversation's first messages."""
        return [dict(m) for m in self.messages] if self.messages else [{"role": "user", "content": self.prompt}]


def system_text(base: str, prompt: Prompt) -> str:
    """The system prompt of one prompt: the run's, then the row's own."""
    if not prompt.system:
        return base
    return f"{base}\n\n{prompt.system}" if base else prompt.system


@dataclass(slots=True)
class Rejected:
    line: int  # where the row is: its line (JSONL, CSV), else its row number (1-based)
    reason: str
    text: str
    unit: str = "line"  # what `line` counts: line | row


@dataclass(slots=True)
class RawRow:
    """One row as a reader found it: a dict, or why it is unusable."""

    position: int  # line or row number (1-based), see Reader.unit
    row: dict | None
    reason: str | None = None
    text: str = ""  # the start of an unusable row, for rejected.jsonl
    binary: frozenset[str] = frozenset()  # columns of binary data that is not UTF-8 (kept as base64 text)


class Reader(Protocol):
    """One dataset format: its rows in order, one at a time."""

    format: DatasetFormat
    unit: str  # what a RawRow's position counts: line | row

    def columns(self) -> list[str] | None:
        """The column names the schema declares (None: a schemaless format; the first rows tell)."""
        ...

    def rows(self) -> Iterator[RawRow]: ...


def canonical_digest(row: dict) -> str:
    """Hash of a row's canonical JSON (key order and whitespace do not matter)."""
    data = json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(data.encode(), digest_size=10).hexdigest()


def id_digest(value: str) -> str:
    """Hash of a row id (`dataset.fields.id`): keys stay short and safe in file and container names."""
    return hashlib.blake2b(f"id:{value}".encode(), digest_size=10).hexdigest()


def prompt_key(base: str, occurrence: int) -> str:
    """A prompt's identity: its row's digest (content, or id) and which occurrence of it this is.

    The one place identities are made: a sample index (k samples per prompt) is appended here."""
    return f"{base}-{occurrence}"


class OccurrenceCounter:
    """Numbers identical rows 0, 1, 2, ... in file order, in little memory."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._dups: dict[str, int] = {}

    def next(self, digest: str) -> int:
        if digest not in self._seen:
            self._seen.add(digest)
            return 0
        n = self._dups.get(digest, 0) + 1
        self._dups[digest] = n
        return n


MAX_DEPTH = 100  # deeper rows are rejected: no recursion limit is reached reading or writing them


def parse_json(raw: bytes) -> tuple[object, str | None]:
    """One JSON document (a JSONL line, a file) as (value, None), or (None, why it is unusable): not UTF-8, not JSON,
    nested deeper than MAX_DEPTH, or holding text that is not valid Unicode (a lone surrogate)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start}"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc}"
    except RecursionError:
        return None, f"nested deeper than {MAX_DEPTH} levels"
    return obj, check_value(obj)


def check_value(obj: object) -> str | None:
    """Why a parsed value cannot be kept (too deep, a lone surrogate), or None."""
    if depth_over(obj, MAX_DEPTH):
        return f"nested deeper than {MAX_DEPTH} levels"
    try:
        json.dumps(obj, ensure_ascii=False).encode()
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end].encode("unicode_escape").decode()
        return f"holds text that is not valid Unicode ({bad}, a lone surrogate)"
    return None


def depth_over(obj: object, limit: int) -> bool:
    """Whether lists/objects nest deeper than `limit` (iterative: any depth is safe)."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def jsonable(value: object) -> object:
    """A column value of a typed format (Parquet, Arrow) as JSON: times as ISO 8601 text, decimals as text,
    bytes as text when UTF-8 else base64, NaN as null."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return None if value != value else value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return str(value)


def not_text(value: object) -> bool:
    """Whether a binary value is not UTF-8 text (jsonable keeps it as base64)."""
    if not isinstance(value, bytes):
        return False
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def excerpt(raw: bytes | str, limit: int = 500) -> str:
    """The start of a rejected row as text (bytes that are not UTF-8 shown as \\xNN escapes)."""
    if isinstance(raw, str):
        return raw.strip()[:limit]
    return raw[: limit * 4].decode("utf-8", errors="backslashreplace").strip()[:limit]
