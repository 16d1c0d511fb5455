"""Hugging Face datasets: a directory written by `save_to_disk`, and a hub dataset by name (`hf:<name>`).

Both end as Arrow stream files (the directory's own, or the `datasets` cache's), read one record batch
at a time, so memory stays that of one batch whatever the size. A hub dataset goes through
`datasets.load_dataset` and its cache: once cached it loads offline (HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path

from hermes_runner.config import DatasetConfig, DatasetFormat
from hermes_runner.dataset.base import RawRow
from hermes_runner.dataset.parquet import BATCH_ROWS, batch_rows, use_system_pool
from hermes_runner.errors import ConfigError

HF_PREFIX = "hf:"


class ArrowFilesReader:
    """Rows of Arrow stream files in order (one dataset split)."""

    unit = "row"

    def __init__(self, files: list[Path], schema_names: list[str], where: str, fmt: DatasetFormat):
        self.files, self._names, self.where, self.format = files, schema_names, where, fmt

    def columns(self) -> list[str] | None:
        return list(self._names)

    def rows(self) -> Iterator[RawRow]:
        import pyarrow as pa

        use_system_pool()
        n = 0
        for path in self.files:
            try:
                with pa.OSFile(str(path)) as f, pa.ipc.open_stream(f) as stream:
                    for row in batch_rows(_rebatched(stream), n):
                        n = row.position
                        yield row
            except (pa.ArrowException, OSError) as exc:
                raise ConfigError(f"{self.where}: unreadable Arrow data in {path.name}: {exc}") from None


def _rebatched(stream) -> Iterator:
    """A stream's batches cut to BATCH_ROWS rows (save_to_disk writes batches of any size)."""
    for batch in stream:
        for start in range(0, batch.num_rows, BATCH_ROWS):
            yield batch.slice(start, BATCH_ROWS)


def disk_reader(path: Path, opts: DatasetConfig) -> ArrowFilesReader:
    """A `save_to_disk` directory: one Dataset, or a DatasetDict whose split is `dataset.split`."""
    if (path / "dataset_dict.json").is_file():
        splits = _json(path / "dataset_dict.json", path).get("splits") or []
        split = pick_split(splits, opts.split, str(path))
        path = path / split
    if not (path / "state.json").is_file():
        raise ConfigError(
            f"dataset_file {path} is a directory, not a dataset written by datasets' save_to_disk "
            "(no state.json or dataset_dict.json in it)"
        )
    state = _json(path / "state.json", path)
    files = [path / f["filename"] for f in state.get("_data_files") or []]
    if not files or not all(f.is_file() for f in files):
        raise ConfigError(f"{path}: state.json names Arrow files that are not there: {[f.name for f in files]}")
    return ArrowFilesReader(files, _schema_names(files[0], path), str(path), DatasetFormat.arrow)


def hub_reader(name: str, opts: DatasetConfig) -> ArrowFilesReader:
    """`hf:<name>` through `datasets.load_dataset` (cached, offline once cached)."""
    files, names = _hub_files(name, opts.subset, opts.split, opts.revision)
    return ArrowFilesReader([Path(f) for f in files], list(names), f"{HF_PREFIX}{name}", DatasetFormat.hf)


@functools.lru_cache(maxsize=8)
def _hub_files(name: str, subset: str | None, split: str | None, revision: str | None) -> tuple[tuple, tuple]:
    """The cache's Arrow files of one split and their column names (resolved once per process: a run reads
    the dataset twice, planning and dispatching)."""
    try:
        import datasets  # here: its import costs a second; only hf datasets need it

        datasets.disable_progress_bars()
    except ImportError:
        raise ConfigError(f"{HF_PREFIX}{name} needs the `datasets` library: pip install 'datasets>=4,<6'") from None
    where = f"{HF_PREFIX}{name}" + (f" (subset {subset})" if subset else "") + (f" @ {revision}" if revision else "")
    try:
        loaded = datasets.load_dataset(name, subset, split=split, revision=revision)
        if isinstance(loaded, datasets.DatasetDict):
            loaded = loaded[pick_split(list(loaded), split, where)]
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - not found, offline without a cache, a bad split: one clear message
        raise ConfigError(f"{where} cannot be loaded through datasets: {type(exc).__name__}: {exc}") from None
    files = tuple(f["filename"] for f in loaded.cache_files)
    if not files or loaded._indices is not None:
        raise ConfigError(f"{where}: not backed by Arrow files in the datasets cache (an in-memory dataset?)")
    return files, tuple(loaded.column_names)


def pick_split(splits: list[str], wanted: str | None, where: str) -> str:
    """`dataset.split`, or the only split, or `train`."""
    if wanted is not None:
        if wanted not in splits:
            raise ConfigError(f"{where} has no split {wanted!r} (dataset.split); its splits: {', '.join(splits)}")
        return wanted
    if len(splits) == 1:
        return splits[0]
    if "train" in splits:
        return "train"
    raise ConfigError(f"{where} has several splits ({', '.join(splits)}): choose one with dataset.split")


def _json(path: Path, where: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{where}: {path.name} is unreadable: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: {path.name} is not a JSON object")
    return data


def _schema_names(first: Path, where: Path) -> list[str]:
    import pyarrow as pa

    try:
        with pa.OSFile(str(first)) as f, pa.ipc.open_stream(f) as stream:
            return list(stream.schema.names)
    except (pa.ArrowException, OSError) as exc:
        raise ConfigError(f"{where}: {first.name} is not an Arrow stream file: {exc}") from None
