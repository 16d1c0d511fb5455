"""Dataset and prefill paths (issue 29): only regular files (or a save_to_disk directory) are read; a FIFO or a
device is refused from its stat, never opened (a FIFO blocked the run, /dev/zero grew it to 7.7 GB); a prefill
file has a size cap."""

from __future__ import annotations

import os

import pytest

from hermes_runner.dataset import open_reader, prefill
from hermes_runner.dataset.prefill import load_prefill
from hermes_runner.errors import ConfigError


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe.jsonl"
    os.mkfifo(path)
    return path


@pytest.mark.timeout(30)  # (without the check, opening the FIFO blocks for good)
def test_a_fifo_as_dataset_or_prefill_is_refused_without_opening_it(fifo):
    with pytest.raises(ConfigError, match=r"dataset_file .*pipe.jsonl is a FIFO: a dataset is a regular file"):
        open_reader(fifo)
    with pytest.raises(ConfigError, match=r"prefill_messages_file .*pipe.jsonl is not a regular file \(a FIFO\)"):
        load_prefill(str(fifo))


def test_a_device_as_dataset_or_prefill_is_refused():
    with pytest.raises(ConfigError, match="dataset_file /dev/null is a character device"):
        open_reader("/dev/null")
    with pytest.raises(ConfigError, match=r"prefill_messages_file /dev/null is not a regular file \(a character"):
        load_prefill("/dev/null")


def test_a_prefill_file_over_the_cap_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "prefill.json"
    path.write_text('[{"role": "user", "content": "' + "x" * 200 + '"}]')
    assert load_prefill(str(path))[0]["role"] == "user"
    monkeypatch.setattr(prefill, "MAX_PREFILL_BYTES", 100)
    with pytest.raises(ConfigError, match=r"prefill\.json is 2\d\d bytes, more than the 100 a prefill may be"):
        load_prefill(str(path))
    with pytest.raises(ConfigError, match="prefill_messages_file not found"):
        load_prefill(str(tmp_path / "none.json"))
