"""Streaming JSONL dataset: validation, rejected lines, stable prompt identity."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import jsonlines

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
    those starting at `shard_index` (indices stay those of the whole dataset).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"dataset_file not found: {path}")
    counter = OccurrenceCounter()
    index = 0
    with path.open("rb") as fp:
        lines = _LineCounter(fp)
        # The stdlib parser, always: jsonlines would pick orjson when installed, which reads
        # integers beyond 64 bits as floats and would change those rows' keys.
        reader = jsonlines.Reader(lines, loads=json.loads)
        while max_samples is None or index < max_samples:
            try:
                obj = reader.read()
            except EOFError:
                break
            except jsonlines.InvalidLineError as exc:
                text = exc.line.strip() if isinstance(exc.line, str) else exc.line.decode(errors="replace").strip()
                if not text:
                    continue  # blank lines are allowed
                if on_reject:
                    cause = exc.__cause__ or exc
                    on_reject(Rejected(exc.lineno, f"invalid JSON: {cause}", text[:500]))
                continue
            reason = _check_row(obj)
            if reason:
                if on_reject:
                    on_reject(Rejected(lines.count, reason, json.dumps(obj, ensure_ascii=False)[:500]))
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


class _LineCounter:
    """Iterates a file's lines and remembers how many it has handed out."""

    def __init__(self, fp) -> None:
        self._fp = fp
        self.count = 0

    def __iter__(self):
        for line in self._fp:
            self.count += 1
            yield line


def _key(row: dict, counter: OccurrenceCounter) -> str:
    digest = canonical_digest(row)
    return f"{digest}-{counter.next(digest)}"
