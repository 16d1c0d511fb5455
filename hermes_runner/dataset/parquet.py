"""Parquet, streamed in record batches through pyarrow; Arrow stream files (`datasets.save_to_disk`) the same way."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from hermes_runner.config import DatasetFormat
from hermes_runner.dataset.base import RawRow, jsonable
from hermes_runner.errors import ConfigError

BATCH_ROWS = 1024  # rows decoded at a time: memory stays that of one batch


class ParquetReader:
    format = DatasetFormat.parquet
    unit = "row"

    def __init__(self, path: Path):
        import pyarrow.parquet as pq  # here: JSONL runs do not pay its import

        self.path = path
        try:
            self._file = pq.ParquetFile(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow says ArrowInvalid, OSError, ...: one clear message
            raise ConfigError(f"{path} is not a Parquet file: {exc}") from None

    def columns(self) -> list[str] | None:
        return list(self._file.schema_arrow.names)

    def rows(self) -> Iterator[RawRow]:
        try:
            yield from batch_rows(self._file.iter_batches(batch_size=BATCH_ROWS))
        except OSError as exc:
            raise ConfigError(f"{self.path}: unreadable Parquet data: {exc}") from None


def batch_rows(batches: Iterable, start: int = 0) -> Iterator[RawRow]:
    """The rows of pyarrow record batches as JSON-compatible dicts, numbered from start + 1."""
    n = start
    for batch in batches:
        for row in batch.to_pylist():
            n += 1
            yield RawRow(n, {str(k): jsonable(v) for k, v in row.items()})
