"""Dataset reading: streaming, validation with line numbers, rejected lines, prompt identity."""

from __future__ import annotations

import json

import pytest

from hermes_runner.dataset import read_prompts
from hermes_runner.errors import ConfigError

from tests.helpers.run import read_jsonl, run_inprocess, write_jsonl

ROWS = [
    {"prompt": "first", "id": 1},
    "this is not json",
    '["a list"]',
    {"text": "no prompt field"},
    {"prompt": 42},
    {"prompt": "   "},
    "",
    {"prompt": "second", "image": "img:1", "cwd": "/w", "tags": ["x"]},
    {"prompt": "third", "image": 7},
]


def test_bad_lines_are_reported_with_line_and_reason(tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", ROWS)
    rejected = []
    prompts = list(read_prompts(ds, on_reject=rejected.append))
    assert [p.prompt for p in prompts] == ["first", "second"]
    assert [p.index for p in prompts] == [0, 1]
    assert prompts[1].image == "img:1" and prompts[1].cwd == "/w" and prompts[1].fields == {"tags": ["x"]}
    got = {r.line: r.reason for r in rejected}
    assert set(got) == {2, 3, 4, 5, 6, 9}
    assert "invalid JSON" in got[2]
    assert "not a JSON object" in got[3]
    assert "missing 'prompt'" in got[4]
    assert "not a string" in got[5]
    assert "empty" in got[6]
    assert "'image'" in got[9]


def test_good_lines_run_and_bad_ones_go_to_rejected_jsonl(make_cfg, tmp_path, run_dir, server):
    workdir = tmp_path / "w"
    workdir.mkdir()
    rows = [{**r, "cwd": str(workdir)} if isinstance(r, dict) and "cwd" in r else r for r in ROWS]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 2 and stats["prompts"]["rejected_lines"] == 6
    rejected = read_jsonl(run_dir / "rejected.jsonl")
    assert [r["line"] for r in rejected] == [2, 3, 4, 5, 6, 9]
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    meta = entries[1]["metadata"]
    assert meta["image"] == "img:1" and meta["cwd"] == str(workdir)
    assert json.loads(meta["row_fields"]) == {"tags": ["x"]}
    assert json.loads(entries[0]["metadata"]["row_fields"]) == {"id": 1}


def test_a_file_without_good_lines_is_a_clear_error(make_cfg, tmp_path, run_dir, server, caplog):
    ds = write_jsonl(tmp_path / "d.jsonl", ["nope", {"x": 1}])
    code, _ = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 2 and "no usable prompt" in caplog.text and server.requests == []
    with pytest.raises(ConfigError, match="not found"):
        list(read_prompts(tmp_path / "missing.jsonl"))


def test_identity_is_content_plus_occurrence(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"prompt": "x", "k": 1}, {"prompt": "y"}, {"k": 1, "prompt": "x"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"prompt": "y"}, {"prompt": "x", "k": 1}, {"prompt": "x", "k": 1}])
    ka = [p.key for p in read_prompts(a)]
    kb = [p.key for p in read_prompts(b)]
    assert ka[0] != ka[2] and ka[0].split("-")[0] == ka[2].split("-")[0]  # same content, two occurrences
    assert sorted(ka) == sorted(kb)


def test_max_samples_and_shards_slice_deterministically(tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(10)])
    assert [p.index for p in read_prompts(ds, max_samples=4)] == [0, 1, 2, 3]
    shards = [[p.index for p in read_prompts(ds, shard_index=i, shard_count=3)] for i in range(3)]
    assert shards == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]


HOSTILE = [
    b'{"prompt": "good one"}',
    b"[" * 100_000 + b"]" * 100_000,  # beyond the parser's recursion limit
    b'{"prompt": "deep", "x": ' + b"[" * 150 + b"]" * 150 + b"}",  # parses, but deeper than MAX_DEPTH
    b'{"prompt": "\\ud800 lone surrogate"}',
    b'{"prompt": "ok", "\\udfff": 1}',
    b'{"prompt": "caf\xe9 in latin-1"}',
    b"\xff\xfe{}",
    b'{"prompt": "good two"}',
]


def test_hostile_lines_are_rejected_never_crash(tmp_path):
    ds = tmp_path / "d.jsonl"
    ds.write_bytes(b"\n".join(HOSTILE) + b"\n")
    rejected = []
    prompts = list(read_prompts(ds, on_reject=rejected.append))
    assert [p.prompt for p in prompts] == ["good one", "good two"]
    got = {r.line: r.reason for r in rejected}
    assert set(got) == {2, 3, 4, 5, 6, 7}
    assert "nested deeper than 100" in got[2] and "nested deeper than 100" in got[3]
    assert "lone surrogate" in got[4] and "\\ud800" in got[4] and "lone surrogate" in got[5]
    assert got[6] == "not UTF-8: byte 0xe9 at offset 15" and got[7].startswith("not UTF-8: byte 0xff")
    assert "\\xe9" in rejected[4].text and len(rejected[0].text) <= 500


def test_hostile_lines_go_to_rejected_jsonl_and_the_run_goes_on(make_cfg, tmp_path, run_dir, server):
    ds = tmp_path / "d.jsonl"
    ds.write_bytes(b"\n".join(HOSTILE) + b"\n")
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 2 and stats["prompts"]["rejected_lines"] == 6
    rejected = read_jsonl(run_dir / "rejected.jsonl")
    assert [r["line"] for r in rejected] == [2, 3, 4, 5, 6, 7]
    assert len(read_jsonl(run_dir / "trajectories.jsonl")) == 2


def test_a_byte_order_mark_on_the_first_line_is_skipped(tmp_path):
    ds = tmp_path / "d.jsonl"
    ds.write_bytes(b'\xef\xbb\xbf{"prompt": "one"}\r\n{"prompt": "two"}\r\n')
    assert [p.prompt for p in read_prompts(ds)] == ["one", "two"]


def test_a_directory_as_dataset_file_says_so(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        list(read_prompts(tmp_path))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 100"),
        (b'[{"role": "user", "content": "caf\xe9"}]', "not UTF-8"),
        (b'[{"role": "user", "content": "\\ud800"}]', "lone surrogate"),
        (None, "is a directory"),
    ],
)
def test_a_bad_prefill_file_is_a_clear_error(make_cfg, tmp_path, run_dir, server, caplog, content, message):
    prefill = tmp_path / "prefill.json"
    if content is None:
        prefill.mkdir()
    else:
        prefill.write_bytes(content)
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    code, _ = run_inprocess(make_cfg(f"prefill_messages_file={prefill}", dataset=ds), run_dir)
    assert code == 2 and message in caplog.text and "prefill_messages_file" in caplog.text
    assert server.requests == []
