"""Row ids (`dataset.fields.id`) are identities (issue 29): a second row with an earlier row's id is refused,
naming the id and both positions, before any prompt runs (two rows sharing one were paired with each other's
trajectories once they swapped places)."""

from __future__ import annotations

import pytest

from hermes_runner.config import DatasetConfig, DatasetFields
from hermes_runner.dataset import read_prompts
from hermes_runner.errors import ConfigError

from tests.helpers.run import write_jsonl

BY_ID = DatasetConfig(fields=DatasetFields(id="id"))


def test_a_duplicate_id_is_refused_naming_it_and_both_lines(tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "prompt": "one"}, "", {"id": "b", "prompt": "two"},
                                            {"id": "a", "prompt": "three"}])  # fmt: skip
    prompts = read_prompts(ds, options=BY_ID)
    assert next(prompts).prompt == "one" and next(prompts).prompt == "two"  # (streamed: told where it is met)
    with pytest.raises(ConfigError, match=r"dataset.fields.id 'id' is \"a\" in line 1 and in line 4: ids must be"):
        next(prompts)


def test_ids_that_are_the_same_text_are_the_same_id(tmp_path):
    ds = tmp_path / "d.csv"
    ds.write_text("id,prompt\n7,one\n8,two\n")
    assert [p.prompt for p in read_prompts(ds, options=BY_ID)] == ["one", "two"]
    ds2 = write_jsonl(tmp_path / "d.jsonl", [{"id": 7, "prompt": "one"}, {"id": "7", "prompt": "two"}])
    with pytest.raises(ConfigError, match=r"is \"7\" in line 1 and in line 2"):
        list(read_prompts(ds2, options=BY_ID))


def test_without_ids_identical_rows_are_occurrences_as_before(tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "same"}, {"prompt": "same"}])
    keys = [p.key for p in read_prompts(ds)]
    assert keys[0].rsplit("-", 1) == [keys[1].rsplit("-", 1)[0], "0"] and keys[1].endswith("-1")
