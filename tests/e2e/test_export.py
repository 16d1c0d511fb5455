"""Dataset exports of a real run, loaded back with the libraries trainers use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from datasets import Dataset, DatasetDict, load_dataset, load_from_disk
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
from pydantic import TypeAdapter

from hermes_runner.commands.export import main
from hermes_runner.errors import ExitCode
from hermes_runner.testing.scripted_server import ScriptedServer
from hermes_runner.tools.catalog import NOT_IN_HERMES, tool_names
from hermes_runner.trajectory.export import export

from tests.helpers.openai_ft import check_file
from tests.helpers.run import ROOT, read_jsonl
from tests.helpers.sample_run import make_run

MESSAGES = TypeAdapter(list[ChatCompletionMessageParam])
TOOLS = TypeAdapter(list[ChatCompletionToolParam])


@pytest.fixture(scope="module")
def sample(_server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    _server.reset()
    return make_run(_server, tmp_path_factory.mktemp("export"))


@pytest.fixture(scope="module")
def stats(sample: Path) -> dict:
    return json.loads((sample / "statistics.json").read_text())


def shape(value: object) -> object:
    """The structure of a value: key names and value types, recursively (lists by their items)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        common: object = "NoneType"
        for v in value:
            common = merge_shapes(common, shape(v))
        return [] if common == "NoneType" else [common]
    return type(value).__name__


def merge_shapes(a: object, b: object) -> object:
    """Shapes are equal, except that an empty list or a null fits any shape."""
    if a in ([], "NoneType"):
        return b
    if b in ([], "NoneType"):
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), (a.keys(), b.keys())
        return {k: merge_shapes(a[k], b[k]) for k in a}
    if isinstance(a, list) and isinstance(b, list):
        return [merge_shapes(a[0], b[0])]
    assert a == b, (a, b)
    return a


def assert_one_schema(rows: list[dict]) -> None:
    common: object = "NoneType"
    for row in rows:
        common = merge_shapes(common, shape(row))


def test_parquet_loads_with_one_schema(sample: Path, stats: dict, tmp_path: Path) -> None:
    path, counts = export(sample, "parquet", tmp_path / "pq")
    assert counts == {"kept": stats["prompts"]["ok"]}
    ds = load_dataset("parquet", data_files=str(path), split="train")
    assert ds.num_rows == stats["prompts"]["ok"]
    rows = ds.to_list()
    assert_one_schema(rows)
    schema = pq.read_schema(path)
    assert "null" not in str(schema)  # every column has a real type, even when all its values are empty
    assert set(rows[0]["tool_stats"]) == set(tool_names()) - NOT_IN_HERMES  # moa is not configured
    # Same trajectories as trajectories.jsonl, conversations intact.
    originals = {r["metadata"]["prompt_key"]: r for r in read_jsonl(sample / "trajectories.jsonl")}
    for row in rows:
        orig = originals[row["metadata"]["prompt_key"]]
        assert [(t["from"], t["value"]) for t in row["conversations"]] == [
            (t["from"], t["value"]) for t in orig["conversations"]
        ]
        assert row["tool_stats"] == orig["tool_stats"] and row["usage"] == orig["usage"]
        assert row["discard_reason"] == "" and row["stop_reason"] == orig["stop_reason"]
        assert all(set(t) == {"from", "value"} for t in row["conversations"])  # hermes layout: calls in value


def test_hf_dataset_and_splits(sample: Path, stats: dict, tmp_path: Path) -> None:
    path, _ = export(sample, "hf", tmp_path / "hf")
    ds = load_from_disk(str(path))
    assert isinstance(ds, Dataset) and ds.num_rows == stats["prompts"]["ok"]
    assert_one_schema(ds.to_list())

    path, counts = export(sample, "splits", tmp_path / "splits")
    dd = load_from_disk(str(path))
    assert isinstance(dd, DatasetDict) and set(dd) == {"kept", "discarded"}
    assert counts == {"kept": stats["prompts"]["ok"], "discarded": stats["prompts"]["discarded"]}
    assert dd["kept"].num_rows == stats["prompts"]["ok"]
    assert dd["discarded"].num_rows == stats["prompts"]["discarded"]
    assert dd["kept"].features == dd["discarded"].features
    assert_one_schema(dd["kept"].to_list() + dd["discarded"].to_list())
    reasons = {r["discard_reason"] for r in dd["discarded"]}
    assert reasons == set(stats["discarded_by_reason"])
    assert {r["discard_reason"] for r in dd["kept"]} == {""}


def test_openai_lines_pass_openais_fine_tuning_rules(sample: Path, stats: dict, tmp_path: Path) -> None:
    path, _ = export(sample, "openai", tmp_path / "oa")
    assert check_file(path) == Counter()  # 0 violations of OpenAI's rules (tests/helpers/openai_ft.py)
    tagged, _ = export(sample, "openai", tmp_path / "tagged", metadata=True)  # the same lines, with their ids
    rows = read_jsonl(tagged)
    assert [{k: r[k] for k in r if k not in ("id", "metadata", "provenance")} for r in rows] == read_jsonl(path)
    assert len(rows) == stats["prompts"]["ok"]
    originals = {r["metadata"]["prompt_key"]: r for r in read_jsonl(sample / "trajectories.jsonl")}
    seen_calls = 0
    for row in rows:
        msgs = row["messages"]
        MESSAGES.validate_python(msgs)  # the OpenAI SDK's own message types take them as they are
        TOOLS.validate_python(row["tools"])
        assert {t["function"]["name"] for t in row["tools"]} <= set(tool_names())
        assert msgs[0]["role"] == "system" and "function-calling AI model" not in msgs[0]["content"]
        assert msgs[1]["role"] == "user"
        for m in msgs:
            assert "reasoning_content" not in m and "<think>" not in m.get("content", "")  # dropped by default
            assert "<tool_call>" not in m.get("content", "") or m["role"] == "tool"
            seen_calls += len(m.get("tool_calls", []))
        gpt = [t for t in originals[row["id"]]["conversations"] if t["from"] == "gpt"]
        assert sum(m["role"] == "assistant" for m in msgs) == len(gpt)
        assert sum(len(m.get("tool_calls", [])) for m in msgs) == sum(t["value"].count("<tool_call>") for t in gpt)
    assert seen_calls == sum(t["count"] for t in stats["tool_statistics"].values())

    inline, _ = export(sample, "chat", tmp_path / "inline", reasoning="inline")
    think = [m for r in read_jsonl(inline) for m in r["messages"] if m["role"] == "assistant"]
    assert all("reasoning_content" not in m for m in think)
    assert any(m.get("content", "").startswith("<think>\n") for m in think)
    kept, _ = export(sample, "openai", tmp_path / "field", reasoning="field", metadata=True)
    asked = read_jsonl(kept)
    assert all({"id", "metadata"} <= set(r) for r in asked)
    assert any("reasoning_content" in m for r in asked for m in r["messages"])  # an extra field, as asked


def test_export_command(sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "hermes_runner.export", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **(env or {})},
        )

    res = cli(str(sample), "--to", "splits", "--out", str(tmp_path / "s"))
    assert res.returncode == 0, res.stderr
    assert "15 kept, 6 discarded" in res.stdout
    with pytest.raises(SystemExit) as exc:
        main([str(sample), "--to", "xml"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err
    assert main([str(tmp_path / "nowhere"), "--to", "parquet"]) == 2
    assert "not a directory" in capsys.readouterr().err
    # A sweep is exported job by job.
    sweep = tmp_path / "sweep"
    for job in ("a=1", "a=2"):
        (sweep / job).mkdir(parents=True)
        (sweep / job / "ledger.jsonl").write_text("")
    assert main([str(sweep), "--to", "parquet"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{job} parquet: {sweep / job / 'export' / 'parquet' / 'trajectories.parquet'}: 0 kept"
        for job in ("a=1", "a=2")
    ]
    # Pushing needs the user's token; without one the command says how to log in (nothing is uploaded).
    home = tmp_path / "hf-home"
    res = cli(
        str(sample),
        "--to",
        "parquet",
        "--out",
        str(tmp_path / "p"),
        "--push-to-hub",
        "me/data",
        env={"HF_HOME": str(home), "HF_TOKEN": "", "HF_HUB_OFFLINE": "1"},
    )
    assert res.returncode == 2 and "no Hugging Face token" in res.stderr
    assert (tmp_path / "p" / "trajectories.parquet").exists()


# -- every kind of run dir ---------------------------------------------------------------------


def _run(make_cfg, tmp_path: Path, name: str, rows: list[dict]) -> Path:
    from tests.helpers.run import run_inprocess, write_jsonl

    ds = write_jsonl(tmp_path / f"{name}.jsonl", rows)
    run_dir = tmp_path / name
    code, _ = run_inprocess(make_cfg(f"run_name={name}", dataset=ds), run_dir)
    assert code in (ExitCode.DONE, ExitCode.NOTHING_KEPT), code
    return run_dir


def test_splits_of_a_run_without_discards(make_cfg, tmp_path: Path) -> None:
    run_dir = _run(make_cfg, tmp_path, "clean", [{"prompt": f"task {i}"} for i in range(3)])
    path, counts = export(run_dir, "splits", tmp_path / "s")
    assert counts == {"kept": 3, "discarded": 0}
    dd = load_from_disk(str(path))
    assert dd["kept"].num_rows == 3 and dd["discarded"].num_rows == 0
    assert dd["discarded"].features == dd["kept"].features  # the empty split has the same columns


def test_exports_of_a_run_with_nothing_kept_are_empty_and_typed(make_cfg, tmp_path: Path) -> None:
    from tests.helpers.run import script

    run_dir = _run(make_cfg, tmp_path, "none", [{"prompt": script({"content": f"plain {i}"})} for i in range(2)])
    clean = _run(make_cfg, tmp_path, "clean", [{"prompt": "task 0"}])
    reference = load_from_disk(str(export(clean, "hf", tmp_path / "ref")[0])).features
    path, counts = export(run_dir, "hf", tmp_path / "hf")
    assert counts == {"kept": 0}
    ds = load_from_disk(str(path))
    assert ds.num_rows == 0 and ds.features == reference  # the columns a run with kept rows has
    path, _ = export(run_dir, "parquet", tmp_path / "pq")
    assert pq.read_table(path).num_rows == 0  # (datasets' parquet loader refuses a file without rows)
    assert pq.read_schema(path).equals(pq.read_schema(export(clean, "parquet", tmp_path / "refpq")[0]))
    path, counts = export(run_dir, "splits", tmp_path / "sp")
    assert counts == {"kept": 0, "discarded": 2} and load_from_disk(str(path))["discarded"].num_rows == 2
    path, _ = export(run_dir, "openai", tmp_path / "oa")
    assert path.read_text() == "" and (path.parent / "dataset_features.json").exists()


def test_only_completed(sample: Path, stats: dict, tmp_path: Path) -> None:
    path, counts = export(sample, "parquet", tmp_path / "pq", only_completed=True)
    assert (
        counts == {"kept": stats["prompts"]["completed"]} and 0 < stats["prompts"]["completed"] < stats["prompts"]["ok"]
    )
    assert all(r["completed"] for r in load_dataset("parquet", data_files=str(path), split="train"))
    assert main([str(sample), "--to", "openai", "--only-completed", "--out", str(tmp_path / "oa")]) == 0
    assert len(read_jsonl(tmp_path / "oa" / "trajectories.openai.jsonl")) == stats["prompts"]["completed"]


def test_chat_arguments_as_json_text_and_openai_refuses_objects(sample: Path, tmp_path: Path) -> None:
    assert main([str(sample), "--to", "chat", "--arguments", "string", "--out", str(tmp_path / "c")]) == 0
    path = tmp_path / "c" / "trajectories.chat.jsonl"
    calls = [c for r in read_jsonl(path) for m in r["messages"] for c in m.get("tool_calls", [])]
    assert calls and all(isinstance(c["function"]["arguments"], str) for c in calls)
    features = json.loads((tmp_path / "c" / "dataset_features.json").read_text())
    ds = load_dataset(
        "json", data_files=str(path), split="train", features=__import__("datasets").Features.from_dict(features)
    )
    assert ds.num_rows == len(read_jsonl(path))
    assert [r["messages"] for r in ds] == [r["messages"] for r in read_jsonl(path)]  # each message as written
    assert main([str(sample), "--to", "openai", "--arguments", "object", "--out", str(tmp_path / "o")]) == 2
    assert main([str(sample), "--to", "openai", "--metadata", "--out", str(tmp_path / "m")]) == 0
    assert (
        check_file(tmp_path / "m" / "trajectories.openai.jsonl", frozenset({"id", "metadata", "provenance"}))
        == Counter()
    )
