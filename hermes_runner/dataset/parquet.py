"""Parquet, streamed in record batches through pyarrow; Arrow stream files (`datasets.save_to_disk`) the same way."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from hermes_runner.config import DatasetFormat
from hermes_runner.dataset.base import RawRow, jsonable, not_text
from hermes_runner.errors import ConfigError

BATCH_ROWS = 1024  # rows decoded at a time: memory stays that of one batch


class ParquetReader:
    format = DatasetFormat.parquet
    unit = "row"

    def __init__(self, path: Path):
        import pyarrow.parquet as pq  # here: JSONL runs do not pay its import (about 90 MB of RSS)

        use_system_pool()
        self.path = path
        try:
            self._file = pq.ParquetFile(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow says ArrowInvalid, OSError, ...: one clear message
            raise ConfigError(f"{path} is not a Parquet file: {exc}") from None

    def columns(self) -> list[str] | None:
        return list(self._file.schema_arrow.names)

    def rows(self) -> Iterator[RawRow]:
        try:
            # One thread: rows are consumed one at a time anyway, and decoder threads each keep a malloc arena.
            yield from batch_rows(self._file.iter_batches(batch_size=BATCH_ROWS, use_threads=False))
        except OSError as exc:
            raise ConfigError(f"{self.path}: unreadable Parquet data: {exc}") from None


def use_system_pool() -> None:
    """pyarrow allocates through malloc: its default pool (mimalloc) keeps what a batch freed, and a run's
    process reads one batch at a time (bench/dataset_formats.py: 1M Parquet rows peak 35 MB lower)."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def batch_rows(batches: Iterable, start: int = 0) -> Iterator[RawRow]:
    """The rows of pyarrow record batches as JSON-compatible dicts, numbered from start + 1; a binary
    column's value that is not UTF-8 is named in the row's `binary` (a prompt must be text)."""
    import pyarrow as pa

    n = start
    for batch in batches:
        binary = [
            f.name for f in batch.schema
            if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type) or pa.types.is_fixed_size_binary(f.type)
        ]  # fmt: skip
        for row in batch.to_pylist():
            n += 1
            bad = frozenset(str(c) for c in binary if not_text(row[c])) if binary else frozenset()
            yield RawRow(n, {str(k): jsonable(v) for k, v in row.items()}, binary=bad)
