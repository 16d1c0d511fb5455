"""CSV with a header row: every value is text (an empty cell is an empty string)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from hermes_runner.config import DatasetFormat
from hermes_runner.dataset.base import RawRow, excerpt
from hermes_runner.dataset.jsonl import sniff_binary
from hermes_runner.errors import ConfigError

csv.field_size_limit(1 << 30)  # a cell may hold a whole problem statement or file


class CsvReader:
    format = DatasetFormat.csv
    unit = "line"

    def __init__(self, path: Path):
        self.path = path
        sniff_binary(path, "CSV")
        with self._open() as fp:
            try:
                header = next(csv.reader(fp), None)
            except (csv.Error, UnicodeDecodeError) as exc:
                raise ConfigError(f"{path} is not a CSV file: its header row is unreadable ({exc})") from None
        if not header or not any(h.strip() for h in header):
            raise ConfigError(f"{path} is not a CSV dataset: no header row naming the columns")
        if len(set(header)) != len(header):
            dup = sorted({h for h in header if header.count(h) > 1})
            raise ConfigError(f"{path}: the header names a column twice: {', '.join(dup)}")
        self.header = header

    def _open(self):
        return self.path.open("r", encoding="utf-8-sig", errors="strict", newline="")

    def columns(self) -> list[str] | None:
        return list(self.header)

    def rows(self) -> Iterator[RawRow]:
        width = len(self.header)
        with self._open() as fp:
            reader = csv.reader(fp)
            try:
                next(reader)
                for cells in reader:
                    line = reader.line_num
                    if not cells or (len(cells) == 1 and not cells[0].strip() and width > 1):
                        continue  # a blank line
                    if len(cells) != width:
                        why = f"{len(cells)} cells where the header has {width} columns"
                        yield RawRow(line, None, why, excerpt(",".join(cells)))
                        continue
                    yield RawRow(line, dict(zip(self.header, cells, strict=True)))
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"{self.path} is not a CSV file in UTF-8: {exc.reason} near line {reader.line_num + 1}"
                ) from None
            except csv.Error as exc:
                raise ConfigError(f"{self.path}: unreadable CSV at line {reader.line_num}: {exc}") from None
