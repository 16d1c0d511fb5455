"""Streaming JSONL dataset: validation, rejected lines, stable prompt identity; the prefill messages file."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hermes_runner.errors import ConfigError

KNOWN_FIELDS = ("prompt", "image", "docker_image", "cwd")


@dataclass(slots=True)
class Prompt:
    """One dataset row ready to run."""

    index: int  # position among the good rows of the current dataset
    key: str  # content hash + occurrence number: stable across reorders and edits
    prompt: str
    image: str | None = None
    cwd: str | None = None
    fields: dict = field(default_factory=dict)  # every other field of the row


@dataclass(slots=True)
class Rejected:
    line: int
    reason: str
    text: str


def canonical_digest(row: dict) -> str:
    """Hash of a row's canonical JSON (key order and whitespace do not matter)."""
    data = json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(data.encode(), digest_size=10).hexdigest()


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


def _check_row(obj: object) -> str | None:
    if not isinstance(obj, dict):
        return f"not a JSON object ({type(obj).__name__})"
    if "prompt" not in obj:
        return "missing 'prompt'"
    prompt = obj["prompt"]
    if not isinstance(prompt, str):
        return f"'prompt' is {type(prompt).__name__}, not a string"
    if not prompt.strip():
        return "'prompt' is empty"
    for name in ("image", "docker_image", "cwd"):
        if obj.get(name) is not None and not isinstance(obj[name], str):
            return f"'{name}' is {type(obj[name]).__name__}, not a string"
    return None


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
    if _depth_over(obj, MAX_DEPTH):
        return None, f"nested deeper than {MAX_DEPTH} levels"
    try:
        json.dumps(obj, ensure_ascii=False).encode()
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end].encode("unicode_escape").decode()
        return None, f"holds text that is not valid Unicode ({bad}, a lone surrogate)"
    return obj, None


def _depth_over(obj: object, limit: int) -> bool:
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


def read_prompts(
    path: str | Path,
    *,
    max_samples: int | None = None,
    shard_index: int = 0,
    shard_count: int = 1,
    on_reject: Callable[[Rejected], None] | None = None,
) -> Iterator[Prompt]:
    """Yield the good rows of a JSONL file one at a time; report bad lines to `on_reject`.

    `max_samples` keeps the first N good rows; a shard keeps every `shard_count`-th of
    those starting at `shard_index` (indices stay those of the whole dataset). Blank lines
    are skipped; any other unusable line (see `parse_json`, `_check_row`) is rejected.
    """
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"dataset_file is a directory, not a JSONL file: {path}")
    if not path.is_file():
        raise ConfigError(f"dataset_file not found: {path}")
    counter = OccurrenceCounter()
    index = 0
    with path.open("rb") as fp:
        # The stdlib parser, always: orjson reads integers beyond 64 bits as floats, which would
        # change those rows' keys.
        for lineno, raw in enumerate(fp, 1):
            if max_samples is not None and index >= max_samples:
                break
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte order mark (files saved by some Windows editors)
            if not raw.strip():
                continue  # blank lines are allowed
            obj, reason = parse_json(raw)
            if reason is None:
                reason = _check_row(obj)
            if reason:
                if on_reject:
                    on_reject(Rejected(lineno, reason, _excerpt(raw)))
                continue
            key = _key(obj, counter)
            if index % shard_count == shard_index:
                yield Prompt(
                    index=index,
                    key=key,
                    prompt=obj["prompt"],
                    image=obj.get("image") or obj.get("docker_image"),
                    cwd=obj.get("cwd"),
                    fields={k: v for k, v in obj.items() if k not in KNOWN_FIELDS},
                )
            index += 1


def _excerpt(raw: bytes, limit: int = 500) -> str:
    """The start of a rejected line as text (bytes that are not UTF-8 shown as \\xNN escapes)."""
    return raw[: limit * 4].decode("utf-8", errors="backslashreplace").strip()[:limit]


def _key(row: dict, counter: OccurrenceCounter) -> str:
    digest = canonical_digest(row)
    return f"{digest}-{counter.next(digest)}"


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
