"""Datasets in every format (issue 19): JSONL, JSON, CSV, Parquet, save_to_disk dirs, hf:<name> from the cache;
field mapping, prompt templates, Inspect-style message lists, identity by id, bad input."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from hermes_runner.config import DatasetConfig, DatasetFields
from hermes_runner.dataset import json_file, read_prompts
from hermes_runner.errors import ConfigError

from tests.helpers.machine import require
from tests.helpers.run import base_overrides, read_jsonl, run_cli, run_inprocess, script, write_jsonl

ROWS = [
    {"id": "r1", "prompt": "What is two plus two?", "target": "4", "level": 1},
    {"id": "r2", "prompt": "Name a prime above ten.", "target": "11", "level": 2},
    {"id": "r3", "prompt": "Spell cat backwards.", "target": "tac", "level": 1},
]


def _rows_as_text(rows: list[dict]) -> list[dict]:
    return [{k: str(v) for k, v in r.items()} for r in rows]


def write_format(fmt: str, directory: Path, rows: list[dict]) -> Path:
    """`rows` written as `fmt`, the way people have them (pandas/datasets/csv module)."""
    import datasets

    if fmt == "jsonl":
        return write_jsonl(directory / "d.jsonl", rows)
    if fmt == "json":
        (directory / "d.json").write_text(json.dumps(rows, indent=2))
        return directory / "d.json"
    if fmt == "json-lines":  # what datasets' to_json writes under a .json name
        datasets.Dataset.from_list(rows).to_json(directory / "d.json")
        return directory / "d.json"
    if fmt == "csv":
        with (directory / "d.csv").open("w", newline="") as fp:
            w = csv.DictWriter(fp, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        return directory / "d.csv"
    if fmt == "parquet":
        datasets.Dataset.from_list(rows).to_parquet(directory / "d.parquet")
        return directory / "d.parquet"
    if fmt == "save_to_disk":
        datasets.Dataset.from_list(rows).save_to_disk(directory / "disk")
        return directory / "disk"
    if fmt == "dataset_dict":
        ds = datasets.Dataset.from_list(rows)
        datasets.DatasetDict({"train": ds.select([0]), "test": ds}).save_to_disk(directory / "dd")
        return directory / "dd"
    raise AssertionError(fmt)


FORMATS = ["jsonl", "json", "json-lines", "csv", "parquet", "save_to_disk", "dataset_dict"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_runs_end_to_end(fmt, make_cfg, tmp_path, run_dir, server):
    ds = write_format(fmt, tmp_path, ROWS)
    extra = ["dataset.split=test"] if fmt == "dataset_dict" else []
    code, stats = run_inprocess(make_cfg(*extra, dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 3 and stats["prompts"]["rejected_lines"] == 0
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert [e["conversations"][1]["value"] for e in entries] == [r["prompt"] for r in ROWS]
    for row, e in zip(ROWS, entries, strict=True):
        fields = json.loads(e["metadata"]["row_fields"])  # every other column, kept
        want = {k: v for k, v in row.items() if k != "prompt"}
        assert fields == (_rows_as_text([want])[0] if fmt == "csv" else want)
        assert server.calls_for(row["prompt"])
    # the same rows in a typed format have the same identity as in JSONL (CSV cells are text: other rows)
    if fmt != "csv":
        jsonl = write_jsonl(tmp_path / "same.jsonl", ROWS)
        assert {p.key for p in read_prompts(jsonl)} == {r["key"] for r in read_jsonl(run_dir / "ledger.jsonl")}


def _hub_cache(tmp_path: Path) -> Path:
    """A datasets cache holding hub dataset `acme/tiny` (splits train, test), as a first online load leaves it;
    built from local files with the json builder, placed where `load_dataset("acme/tiny")` finds it offline."""
    from datasets.data_files import DataFilesDict
    from datasets.packaged_modules.json.json import Json

    src = tmp_path / "src"
    src.mkdir()
    write_jsonl(src / "train.jsonl", ROWS)
    write_jsonl(src / "test.jsonl", [{"id": "t1", "prompt": "A test split prompt."}])
    cache = tmp_path / "hf" / "datasets"
    files = DataFilesDict.from_patterns({"train": [str(src / "train.jsonl")], "test": [str(src / "test.jsonl")]})
    builder = Json(cache_dir=str(cache), dataset_name="tiny", hash="0123456789abcdef", data_files=files)
    builder.download_and_prepare()
    (config_dir,) = (cache / "tiny").iterdir()
    shutil.move(cache / "tiny", cache / "acme___tiny")
    (cache / "acme___tiny" / config_dir.name).rename(cache / "acme___tiny" / "default")
    shutil.rmtree(src)  # only the cache is left
    return cache


def test_an_hf_name_loads_offline_from_the_datasets_cache(server, tmp_path):
    cache = _hub_cache(tmp_path)
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_DATASETS_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    common = [*base_overrides(server, tmp_path), "dataset_file=hf:acme/tiny"]
    res = run_cli(*common, "run_name=hub", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    entries = read_jsonl(tmp_path / "outputs" / "hub" / "trajectories.jsonl")
    assert [e["conversations"][1]["value"] for e in entries] == [r["prompt"] for r in ROWS]  # train by default
    res = run_cli(*common, "run_name=hub_test", "dataset.split=test", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    entries = read_jsonl(tmp_path / "outputs" / "hub_test" / "trajectories.jsonl")
    assert [e["conversations"][1]["value"] for e in entries] == ["A test split prompt."]
    calls = len(server.requests)
    res = run_cli(*common, "run_name=nope", "dataset.split=validation", cwd=tmp_path, env=env)
    assert res.returncode == 2 and "validation" in res.stderr and "train" in res.stderr
    res = run_cli(*base_overrides(server, tmp_path), "dataset_file=hf:acme/absent", "run_name=x", cwd=tmp_path, env=env)
    assert res.returncode == 2 and "hf:acme/absent cannot be loaded through datasets" in res.stderr
    assert len(server.requests) == calls


# -- field mapping and templates ----------------------------------------------------------------


def test_fields_map_other_column_names(make_cfg, tmp_path, run_dir, server):
    rows = [{"question": "Capital of France?", "answer": "Paris", "check": "grep -q Paris", "topic": "geo"}]
    ds = write_format("csv", tmp_path, rows)
    opts = ["dataset.fields.prompt=question", "dataset.fields.target=answer", "dataset.fields.verify=check"]
    (p,) = read_prompts(
        ds, options=DatasetConfig(fields=DatasetFields(prompt="question", target="answer", verify="check"))
    )
    assert (p.prompt, p.target, p.verify) == ("Capital of France?", "Paris", "grep -q Paris")
    assert p.fields == {"answer": "Paris", "check": "grep -q Paris", "topic": "geo"}  # the prompt column is the prompt
    code, stats = run_inprocess(make_cfg(*opts, dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 1
    (e,) = read_jsonl(run_dir / "trajectories.jsonl")
    assert e["conversations"][1]["value"] == "Capital of France?"
    assert json.loads(e["metadata"]["row_fields"])["answer"] == "Paris"


def swe_row(number: int, text: str, image: str) -> dict:
    """A SWE-bench-style row whose agent looks at which image it runs in, then answers."""
    look = {"name": "terminal", "arguments": {"command": "cat /etc/debian_version 2>/dev/null || echo busybox"}}
    return {
        "instance_id": f"acme__widgets-{number}",
        "repo": "acme/widgets",
        "problem_statement": script(
            {"reasoning": "look", "tool_calls": [look]}, {"reasoning": "ok", "content": "Done."}, text=text
        ),
        "image_name": image,
    }


SWE = [
    swe_row(101, "The widget spins backwards.", "local/bookworm:ci"),
    swe_row(102, "The gadget is too loud.", "local/busybox:ci"),
]
TEMPLATE = "Fix this issue in {{ repo }}: {{ problem_statement }}"


def test_a_template_makes_the_prompt_and_image_name_the_image(tmp_path):
    ds = write_format("parquet", tmp_path, SWE)
    opts = DatasetConfig(fields=DatasetFields(id="instance_id"), prompt_template=TEMPLATE)
    a, b = read_prompts(ds, options=opts)
    assert a.prompt == f"Fix this issue in acme/widgets: {SWE[0]['problem_statement']}"
    assert (a.image, b.image) == ("local/bookworm:ci", "local/busybox:ci")
    assert a.fields == {k: v for k, v in SWE[0].items() if k != "image_name"}  # every column but the image
    # identity is the id: the same row with another statement keeps its key
    edited = [{**SWE[0], "problem_statement": "Something else."}, SWE[1]]
    again = list(read_prompts(write_format("jsonl", tmp_path, edited), options=opts))
    assert [p.key for p in again] == [a.key, b.key] and again[0].digest != a.digest


@pytest.mark.docker
def test_swe_bench_style_rows_run_each_in_its_own_image(make_cfg, tmp_path, run_dir, server):
    require("docker")
    ds = write_format("parquet", tmp_path, SWE)
    cfg = make_cfg(
        "sandbox=docker", "distribution=terminal_only", "sandbox.docker.pool_size=0",
        "dataset.fields.id=instance_id", f"dataset.prompt_template='{TEMPLATE}'", dataset=ds,
    )  # fmt: skip
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 2
    outputs = {}
    for text in ("spins backwards", "too loud"):
        last = max(server.calls_for(text), key=lambda r: r.turn)
        (tool,) = [m for m in last.body["messages"] if m.get("role") == "tool"]
        outputs[text] = json.loads(tool["content"])["output"].strip()
    assert outputs["spins backwards"].startswith("12") and outputs["too loud"] == "busybox"  # bookworm is Debian 12
    meta = [e["metadata"] for e in read_jsonl(run_dir / "trajectories.jsonl")]
    assert [m["image"] for m in meta] == ["local/bookworm:ci", "local/busybox:ci"]
    assert json.loads(meta[0]["row_fields"])["instance_id"] == "acme__widgets-101"


def test_template_problems(make_cfg, tmp_path, run_dir, server, caplog):
    rows = [{"repo": "a/b", "text": "one"}, {"text": "no repo here"}, {"repo": "c/d", "text": "two"}]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    code, stats = run_inprocess(make_cfg("dataset.prompt_template='In {{ repo }}: {{ text }}'", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 2
    assert [e["conversations"][1]["value"] for e in read_jsonl(run_dir / "trajectories.jsonl")] == [
        "In a/b: one", "In c/d: two",
    ]  # fmt: skip
    (rej,) = read_jsonl(run_dir / "rejected.jsonl")
    assert rej["line"] == 2 and "'repo' is undefined" in rej["reason"]
    server.reset()
    for bad, message in [
        ("'In {{ repo }: {{ text }}'", "not a valid Jinja2 template (line 1"),
        ("'{{ title }} {{ text }}'", "dataset.prompt_template variable 'title': no such column"),
    ]:
        caplog.clear()
        code, _ = run_inprocess(make_cfg(f"dataset.prompt_template={bad}", dataset=ds), tmp_path / "r2")
        assert code == 2 and message in caplog.text
    assert server.requests == []


# -- Inspect-style `input` message lists ---------------------------------------------------------


def test_inspect_input_lists_open_the_conversation(make_cfg, tmp_path, run_dir, server):
    rows = [
        {"id": 1, "input": "A plain string input.", "target": "x"},
        {
            "id": 2,
            "input": [
                {"role": "system", "content": "Answer tersely."},
                {"role": "user", "content": "Hi there."},
                {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]},
            ],
            "target": ["4", "four"],
        },
        {"id": 3, "conversations": [{"from": "human", "value": "Old question?"}, {"from": "gpt", "value": "Old."}]},
        {"id": 4, "input": [{"role": "tool", "content": "r"}, {"role": "user", "content": "q"}]},
    ]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    prompts = list(read_prompts(ds))
    assert [p.target for p in prompts] == ["x", '["4", "four"]', None]
    assert prompts[1].prompt == "What is 2+2?" and prompts[1].system == "Answer tersely."
    # a ShareGPT row runs again from its last user turn (its old answer dropped)
    assert prompts[2].messages == [{"role": "user", "content": "Old question?"}] and prompts[2].fields == {"id": 3}
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 3 and stats["prompts"]["rejected_lines"] == 1
    first = min((r for r in server.requests if "Hi there." in json.dumps(r.body)), key=lambda r: r.turn)
    msgs = first.body["messages"]
    assert msgs[0]["role"] == "system" and msgs[0]["content"].endswith("\n\nAnswer tersely.")
    assert [(m["role"], m["content"]) for m in msgs[1:]] == [
        ("user", "Hi there."), ("assistant", "Hello!"), ("user", "What is 2+2?"),
    ]  # fmt: skip
    entry = read_jsonl(run_dir / "trajectories.jsonl")[1]
    turns = entry["conversations"]
    assert "Answer tersely." in turns[0]["value"]
    assert [t["from"] for t in turns[1:4]] == ["human", "gpt", "human"] and turns[3]["value"] == "What is 2+2?"
    reasons = {r["line"]: r["reason"] for r in read_jsonl(run_dir / "rejected.jsonl")}
    assert list(reasons) == [4] and "role 'tool'" in reasons[4]


# -- identity by id ------------------------------------------------------------------------------


def test_with_an_id_editing_a_prompt_keeps_its_trajectory_and_the_ledger_says_so(make_cfg, tmp_path, run_dir, server):
    ds = write_format("csv", tmp_path, ROWS)
    cfg = make_cfg("dataset.fields.id=id", dataset=ds)
    assert run_inprocess(cfg, run_dir)[0] == 0
    calls = len(server.requests)
    edited = [{**ROWS[0], "prompt": "What is two plus two? Show your work."}, *ROWS[1:]]
    write_format("csv", tmp_path, edited)
    code, stats = run_inprocess(make_cfg("dataset.fields.id=id", dataset=ds), run_dir)
    assert code == 0 and len(server.requests) == calls and stats["prompts"]["ok"] == 3
    assert stats["not_in_dataset"]["prompts"] == 0
    notes = [r for r in read_jsonl(run_dir / "ledger.jsonl") if r["status"] == "changed"]
    assert len(notes) == 1 and notes[0]["index"] == 0 and notes[0]["what"] == "prompt"
    assert notes[0]["prompt"].endswith("Show your work.") and notes[0]["was"] != notes[0]["digest"]
    # told once: a third run with the same edit adds no note
    assert run_inprocess(make_cfg("dataset.fields.id=id", dataset=ds), run_dir)[0] == 0
    assert len([r for r in read_jsonl(run_dir / "ledger.jsonl") if r["status"] == "changed"]) == 1
    # a row without its id is rejected
    write_format("csv", tmp_path, [*edited, {"id": "", "prompt": "anonymous", "target": "", "level": ""}])
    code, stats = run_inprocess(make_cfg("dataset.fields.id=id", dataset=ds), run_dir)
    assert code == 0 and len(server.requests) == calls and stats["prompts"]["rejected_lines"] == 1


def test_without_an_id_an_edited_prompt_is_a_new_prompt(make_cfg, tmp_path, run_dir, server):
    ds = write_format("csv", tmp_path, ROWS)
    assert run_inprocess(make_cfg(dataset=ds), run_dir)[0] == 0
    calls = len(server.requests)
    write_format("csv", tmp_path, [{**ROWS[0], "prompt": "Edited."}, *ROWS[1:]])
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0 and len(server.requests) > calls and stats["not_in_dataset"]["prompts"] == 1


# -- bad input -----------------------------------------------------------------------------------


def _parquet_bytes(tmp_path: Path) -> bytes:
    return write_format("parquet", tmp_path, ROWS).read_bytes()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("d.jsonl", "parquet", "is not a JSONL file: it starts like Parquet data"),
        ("d.json", "parquet", "is not a JSON file: it starts like Parquet data"),
        ("d.csv", "parquet", "is not a CSV file: it starts like Parquet data"),
        ("d.parquet", b'{"prompt": "json, not parquet"}\n', "is not a Parquet file"),
        ("d.json", b"prompt,target\nhi,there\n", "is not a JSON dataset: it starts with 'p'"),
        ("d.json", b'[{"prompt": "a"}, {"prompt": "b"', "element 2 of the array is not JSON"),
        ("d.json", b'[{"prompt": "a"}, ', "the array is not closed"),
        ("d.csv", b"", "no header row"),
        ("disk", None, "is a directory, not a dataset written by datasets' save_to_disk"),
    ],
)
def test_a_file_that_is_not_what_its_name_says(make_cfg, tmp_path, run_dir, server, caplog, name, content, message):
    path = tmp_path / "in" / name
    path.parent.mkdir()
    if content is None:
        path.mkdir()
        (path / "notes.txt").write_text("hello")
    else:
        path.write_bytes(_parquet_bytes(tmp_path) if content == "parquet" else content)
    code, _ = run_inprocess(make_cfg(dataset=path), run_dir)
    assert code == 2 and message in caplog.text and server.requests == []


def test_dataset_format_overrides_the_name_and_unknown_formats_are_refused(make_cfg, server, tmp_path, run_dir):
    ds = tmp_path / "rows.txt"
    ds.write_bytes(_parquet_bytes(tmp_path))
    code, stats = run_inprocess(make_cfg("dataset.format=parquet", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 3
    res = run_cli(*base_overrides(server, tmp_path), f"dataset_file={ds}", "dataset.format=xlsx", "run_name=f",
                  cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2 and "dataset.format" in res.stderr and "xlsx" in res.stderr


BAD_ROWS = [
    {"prompt": "good one", "image": None},
    {"prompt": "", "image": None},
    {"prompt": None, "image": None},
    {"prompt": "bad image", "image": 7},
    {"prompt": "good two", "image": None},
]


@pytest.mark.parametrize("fmt", ["json", "parquet", "save_to_disk"])
def test_bad_rows_of_typed_formats_go_to_rejected_jsonl_with_their_row(fmt, make_cfg, tmp_path, run_dir, server):
    rows = BAD_ROWS if fmt == "json" else BAD_ROWS[:3] + BAD_ROWS[4:]  # a typed column holds one type
    ds = write_format(fmt, tmp_path, rows)
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 2
    rejected = read_jsonl(run_dir / "rejected.jsonl")
    want = {2: "'prompt' is empty", 3: "'prompt' is NoneType, not a string"}
    if fmt == "json":
        want[4] = "'image' is int, not a string"
    assert {r["row"]: r["reason"] for r in rejected} == want
    assert all(r["text"] for r in rejected)


def test_bad_csv_rows_go_to_rejected_jsonl_with_their_line(make_cfg, tmp_path, run_dir, server):
    ds = tmp_path / "d.csv"
    ds.write_text('prompt,topic\ngood one,a\n"two\nlines",b\n,empty\ntoo,many,cells\nshort\ngood two,c\n')
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 3  # a quoted newline is one cell
    got = {r["line"]: r["reason"] for r in read_jsonl(run_dir / "rejected.jsonl")}
    assert got == {
        5: "'prompt' is empty",
        6: "3 cells where the header has 2 columns",
        7: "1 cells where the header has 2 columns",
    }


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "parquet", "save_to_disk"])
def test_a_mapping_naming_a_missing_column_stops_before_any_model_call(
    fmt, make_cfg, tmp_path, run_dir, server, caplog
):
    ds = write_format(fmt, tmp_path, ROWS)
    code, _ = run_inprocess(make_cfg("dataset.fields.prompt=question", "dataset.fields.id=uid", dataset=ds), run_dir)
    assert code == 2 and server.requests == []
    assert "dataset.fields.prompt = 'question'" in caplog.text and "dataset.fields.id = 'uid'" in caplog.text
    assert "no such column" in caplog.text and "id, prompt, target, level" in caplog.text


def test_json_arrays_stream_across_buffer_edges(tmp_path, monkeypatch):
    monkeypatch.setattr(json_file, "CHUNK", 7)  # elements, numbers and strings cut at every place
    rows = [{"prompt": f"p{i} " + "x" * (i * 5), "n": 10**i, "f": 1.5} for i in range(12)]
    path = tmp_path / "d.json"
    path.write_text("  \n[ " + " ,\n ".join(json.dumps(r) for r in rows) + " ]\n")
    rejected: list = []
    got = list(read_prompts(path, on_reject=rejected.append))
    assert [p.prompt for p in got] == [r["prompt"] for r in rows] and rejected == []
    assert [p.fields["n"] for p in got] == [10**i for i in range(12)]
    path.write_text('[{"prompt": "a"}, 5, {"prompt": "b"}]')
    got = list(read_prompts(path, on_reject=rejected.append))
    assert [p.prompt for p in got] == ["a", "b"] and [(r.line, r.unit) for r in rejected] == [(2, "row")]
    path.write_text("[]")
    assert list(read_prompts(path)) == []
    path.write_text('[{"prompt": "a"} {"prompt": "b"}]')
    with pytest.raises(ConfigError, match="where , or ] should be"):
        list(read_prompts(path))
