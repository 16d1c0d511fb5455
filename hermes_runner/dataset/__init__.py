"""Datasets in any common format, streamed: rows -> prompts, bad rows rejected with their position, stable identity.

`base` holds the row and prompt types and the `Reader` Protocol; one module per format (`jsonl`, `json_file`,
`csv_file`, `parquet`, `hf`: save_to_disk directories and hub datasets); `mapping` turns a row into a prompt
(`dataset.fields`, `dataset.prompt_template`, message lists); `prefill` reads the prefill messages file.
docs/datasets.md shows each.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from hermes_runner.config import DatasetConfig, DatasetFormat
from hermes_runner.dataset.base import (
    MAX_DEPTH,
    OccurrenceCounter,
    Prompt,
    RawRow,
    Reader,
    Rejected,
    canonical_digest,
    parse_json,
    prompt_key,
    system_text,
)
from hermes_runner.dataset.mapping import Mapping, RowError
from hermes_runner.dataset.prefill import MAX_PREFILL_BYTES, file_kind, load_prefill
from hermes_runner.errors import ConfigError

__all__ = [
    "MAX_DEPTH",
    "MAX_PREFILL_BYTES",
    "OccurrenceCounter",
    "Prompt",
    "RawRow",
    "Reader",
    "Rejected",
    "canonical_digest",
    "check_source",
    "check_mapping",
    "detect_format",
    "load_prefill",
    "open_reader",
    "parse_json",
    "prompt_key",
    "read_prompts",
    "system_text",
]

EXTENSIONS = {
    ".jsonl": DatasetFormat.jsonl,
    ".ndjson": DatasetFormat.jsonl,
    ".json": DatasetFormat.json,
    ".csv": DatasetFormat.csv,
    ".parquet": DatasetFormat.parquet,
    ".pq": DatasetFormat.parquet,
}
SAMPLE_ROWS = 1000  # rows a schemaless format's columns are learned from, for the mapping check


def detect_format(source: str, opts: DatasetConfig) -> DatasetFormat:
    """`dataset.format`, or what the name says: hf:<name>, a directory, the extension (else JSONL, as before)."""
    if opts.format != DatasetFormat.auto:
        return opts.format
    if source.startswith("hf:"):
        return DatasetFormat.hf
    path = Path(source)
    if path.is_dir():
        return DatasetFormat.arrow
    return EXTENSIONS.get(path.suffix.lower(), DatasetFormat.jsonl)


def check_source(source: str | Path) -> Path:
    """The path of a dataset that is a file (not hf:<name>), when it is a regular file or a directory
    (ConfigError otherwise), found from its stat: a FIFO would block the read, a device never end it."""
    path = Path(source)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ConfigError(f"dataset_file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"dataset_file {path} cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise ConfigError(
            f"dataset_file {path} is {file_kind(mode)}: a dataset is a regular file or a save_to_disk directory"
        )
    return path


def open_reader(source: str | Path, opts: DatasetConfig | None = None) -> Reader:
    """The reader of a dataset (ConfigError: not found, or not what its name or dataset.format says)."""
    opts = opts or DatasetConfig()
    source = str(source)
    fmt = detect_format(source, opts)
    if fmt == DatasetFormat.hf:
        from hermes_runner.dataset.hf import HF_PREFIX, hub_reader

        name = source.removeprefix(HF_PREFIX)
        if not name:
            raise ConfigError("dataset_file hf: names no dataset (hf:<owner>/<name>)")
        return hub_reader(name, opts)
    path = check_source(source)
    if fmt == DatasetFormat.arrow:
        from hermes_runner.dataset.hf import disk_reader

        if not path.is_dir():
            raise ConfigError(f"dataset_file {path} is not a directory written by datasets' save_to_disk")
        return disk_reader(path, opts)
    if path.is_dir():
        raise ConfigError(f"dataset_file is a directory, not a {fmt.value} file: {path}")
    if fmt == DatasetFormat.jsonl:
        from hermes_runner.dataset.jsonl import JsonlReader

        return JsonlReader(path)
    if fmt == DatasetFormat.json:
        from hermes_runner.dataset.json_file import JsonReader

        return JsonReader(path)
    if fmt == DatasetFormat.csv:
        from hermes_runner.dataset.csv_file import CsvReader

        return CsvReader(path)
    from hermes_runner.dataset.parquet import ParquetReader

    return ParquetReader(path)


def check_mapping(reader: Reader, mapping: Mapping, source: str) -> None:
    """A mapping that names a column the dataset lacks (its schema, else its first rows) is a ConfigError."""
    if not mapping.explicit and not mapping.template_vars:
        return
    columns = reader.columns()
    if columns is None:
        seen: dict[str, None] = {}
        for i, raw in enumerate(reader.rows()):
            if i >= SAMPLE_ROWS:
                break
            if raw.row is not None:
                seen.update(dict.fromkeys(raw.row))
        columns = list(seen)
        told = f"its first {SAMPLE_ROWS} rows have" if columns else "no row has any"
    else:
        told = "its columns are"
    missing = mapping.missing(columns)
    if missing:
        shown = ", ".join(columns[:30]) + (", ..." if len(columns) > 30 else "")
        raise ConfigError(f"{'; '.join(missing)}: no such column in {source} ({told}: {shown or 'none'})")


def read_prompts(
    path: str | Path,
    *,
    options: DatasetConfig | None = None,
    max_samples: int | None = None,
    shard_index: int = 0,
    shard_count: int = 1,
    on_reject: Callable[[Rejected], None] | None = None,
) -> Iterator[Prompt]:
    """Yield the good rows of a dataset one at a time; report bad rows to `on_reject`.

    `max_samples` keeps the first N good rows; a shard keeps every `shard_count`-th of
    those starting at `shard_index` (indices stay those of the whole dataset). The mapping is
    checked against the schema (or the first rows) before the first prompt is yielded.
    """
    options = options or DatasetConfig()
    reader = open_reader(path, options)
    mapping = Mapping(options)
    check_mapping(reader, mapping, str(path))
    counter = OccurrenceCounter()
    first_line: dict[str, int] | None = {} if mapping.id else None  # id digest -> its row's position
    index = 0
    for raw in reader.rows():
        if max_samples is not None and index >= max_samples:
            break
        prompt = _prompt(raw, mapping, counter, index, on_reject, reader.unit) if raw.row is not None else None
        if raw.row is None and on_reject:
            on_reject(Rejected(raw.position, raw.reason or "unusable", raw.text, reader.unit))
        if prompt is None:
            continue
        if first_line is not None:
            _unique_id(first_line, prompt, raw, mapping.id, reader.unit, str(path))
        if index % shard_count == shard_index:
            yield prompt
        index += 1


def _unique_id(first_line: dict[str, int], prompt: Prompt, raw: RawRow, field: str, unit: str, source: str) -> None:
    """A second row with the id of an earlier one is a ConfigError naming both: an id is a prompt's identity,
    and two rows sharing one would be paired with each other's trajectories once they swap places."""
    digest = prompt.key.rsplit("-", 1)[0]
    first = first_line.setdefault(digest, raw.position)
    if first != raw.position:
        value = json.dumps(raw.row[field], ensure_ascii=False)[:80]
        raise ConfigError(
            f"{source}: dataset.fields.id {field!r} is {value} in {unit} {first} and in {unit} {raw.position}: "
            "ids must be unique (give the row another id, or remove the copy)"
        )


def _prompt(
    raw: RawRow, mapping: Mapping, counter: OccurrenceCounter, index: int, on_reject, unit: str
) -> Prompt | None:
    """The row's prompt with its identity, or None (rejected: told to `on_reject`)."""
    try:
        base = mapping.base_key(raw.row)
        p = mapping.prompt(raw.row, index, "", raw.binary)
    except RowError as exc:
        if on_reject:
            on_reject(Rejected(raw.position, str(exc), raw.text or _row_text(raw.row), unit))
        return None
    p.key = prompt_key(base, counter.next(base))
    return p


def _row_text(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False, default=str)[:500]
