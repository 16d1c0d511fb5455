"""A prompt is text (issue 29): a binary Parquet value that is UTF-8 is its text, one that is not is refused
into rejected.jsonl (it was sent base64-encoded), and a NUL character is refused in any prompt."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from hermes_runner.config import DatasetConfig
from hermes_runner.dataset import read_prompts

from tests.helpers.run import write_jsonl


def read(path, options=None):
    rejected = []
    prompts = list(read_prompts(path, options=options, on_reject=rejected.append))
    return prompts, {r.line: r.reason for r in rejected}


def test_a_binary_prompt_is_text_when_it_is_utf8_without_nul(tmp_path):
    path = tmp_path / "d.parquet"
    blobs = [b"\xff\xfe\x00 not text", "café".encode(), b"nul\x00inside", b"\x89PNG\r\n\x1a\n"]
    pq.write_table(pa.table({"prompt": pa.array(blobs, pa.binary()), "other": pa.array(blobs, pa.binary())}), path)
    prompts, rejected = read(path)
    assert [(p.index, p.prompt) for p in prompts] == [(0, "café")]
    assert prompts[0].fields["other"] == "café"  # (a column that is not the prompt: as before)
    assert rejected == {
        1: "'prompt' is binary data, not UTF-8 text: a prompt must be text",
        3: "the prompt holds a NUL character (\\u0000): a prompt must be text without NUL",
        4: "'prompt' is binary data, not UTF-8 text: a prompt must be text",
    }
    templated, rejected = read(path, DatasetConfig(prompt_template="Look: {{ other }}"))
    assert [p.prompt for p in templated] == ["Look: café"] and sorted(rejected) == [1, 3, 4]
    assert "'other' is binary data" in rejected[1]


def test_a_nul_character_is_refused_in_any_text_prompt(tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "a\u0000b"}, {"prompt": "ok"},
        {"input": [{"role": "system", "content": "s\u0000"}, {"role": "user", "content": "u"}]},
        {"messages": [{"role": "user", "content": "x\u0000"}, {"role": "assistant", "content": "y"}]}])  # fmt: skip
    prompts, rejected = read(ds)
    assert [p.prompt for p in prompts] == ["ok"] and sorted(rejected) == [1, 3, 4]
    assert all("NUL character" in why for why in rejected.values())
