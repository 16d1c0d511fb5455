"""Provenance on every exported row, export manifests and their byte-for-byte reproduction, and `--to all` of a run
and of a sweep: a real scripted run with a prompt template, a system prompt, a scorer and a filter."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from datasets import load_from_disk

from hermes_runner import __version__
from hermes_runner.commands.export import main
from hermes_runner.run import rescore
from hermes_runner.testing.scripted_server import ScriptedServer
from hermes_runner.trajectory.export import FORMATS
from hermes_runner.trajectory.provenance import PROVENANCE_KEYS, digest
from hermes_runner.trajectory.reproduce import MANIFEST_FILE, reproduce

from tests.helpers.run import ROOT, base_overrides, compose_cfg, read_jsonl, run_inprocess, script, write_jsonl

TEMPLATE = "Task: {{ prompt }}"
SYSTEM = "Be brief."
CALL = {"name": "terminal", "arguments": {"command": "echo 42"}}


@pytest.fixture(scope="module")
def run(_server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two rows the `match` scorer passes (one after a tool call), one it fails: discarded by min_reward."""
    _server.reset()
    base = tmp_path_factory.mktemp("provenance")
    rows = [
        {"prompt": script({"reasoning": "Known.", "content": "The answer is 42."}, text="say 42"), "target": "42"},
        {
            "prompt": script(
                {"reasoning": "Ask the shell.", "tool_calls": [CALL]},
                {"reasoning": "It said so.", "content": "42"},
                text="compute 42",
            ),
            "target": "42",
        },
        {"prompt": script({"reasoning": "Unsure.", "content": "I do not know."}, text="guess"), "target": "42"},
    ]
    overrides = [
        "run_name=prov",
        f"dataset_file={write_jsonl(base / 'd.jsonl', rows)}",
        f"dataset.prompt_template='{TEMPLATE}'",
        f"system_prompt='{SYSTEM}'",
        "model.temperature=0.3",
        "+scorer@scorers.answer=match",
        "filters.min_reward=1",
    ]
    run_dir = base / "run"
    code, stats = run_inprocess(compose_cfg(base_overrides(_server, base) + overrides), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 2 and stats["discarded_by_reason"] == {"low_reward": 1}
    return run_dir


@pytest.fixture(scope="module")
def exported(run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`--to all` of the run (each format with its manifest)."""
    out = tmp_path_factory.mktemp("all")
    assert main([str(run), "--to", "all", "--out", str(out)]) == 0
    return out


EXPORTED = [f for f in FORMATS if f != "tokens"]  # (no output.tokens here: --to all leaves tokens out)


def files(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_every_row_of_every_format_has_provenance(run: Path, exported: Path) -> None:
    models = {r["model"] for r in read_jsonl(run / "ledger.jsonl") if r.get("model")}
    rows = {
        "parquet": pq.read_table(exported / "parquet" / "trajectories.parquet").to_pylist(),
        "hf": list(load_from_disk(str(exported / "hf"))),
        "splits": [r for split in load_from_disk(str(exported / "splits")).values() for r in split],
        "chat": read_jsonl(exported / "chat" / "trajectories.chat.jsonl"),  # (openai: only with --metadata)
        "atif": [
            json.loads((exported / "atif" / line["file"]).read_text())["extra"]
            for line in read_jsonl(exported / "atif" / "index.jsonl")
        ],
        "inspect": [  # every sample of the run: the kept and the discarded one
            json.loads(z.read(n))["metadata"]
            for z in [zipfile.ZipFile(next((exported / "inspect").glob("*.eval")))]
            for n in z.namelist()
            if n.startswith("samples/")
        ],
    }
    counts = {"parquet": 2, "hf": 2, "splits": 3, "chat": 2, "atif": 2, "inspect": 3}
    assert {f: len(r) for f, r in rows.items()} == counts
    for fmt in EXPORTED:  # every format has its manifest (formats without a reader here included)
        manifest = json.loads((exported / fmt / MANIFEST_FILE).read_text())
        assert manifest["export"]["format"] == fmt and manifest["run"]["name"] == "prov"
    for fmt, found in rows.items():
        table = json.loads((exported / fmt / MANIFEST_FILE).read_text())["hashes"]
        for row in found:
            p = row["provenance"]
            assert set(p) == set(PROVENANCE_KEYS) and None not in p.values(), (fmt, p)
            assert p["system_prompt"] == digest(SYSTEM) and table[p["system_prompt"]] == SYSTEM
            assert p["prompt_template"] == digest(TEMPLATE) and table[p["prompt_template"]] == TEMPLATE
            assert table[p["sampling"]]["model.temperature"] == 0.3
            assert "terminal" in {t["function"]["name"] for t in table[p["tools"]]}
            assert table[p["scorers"]]["scorers"]["answer"]["kind"] == "match"
            assert table[p["filters"]]["min_reward"] == 1
            assert p["model"] in models and p["runner_version"] == __version__
    dispositions = sorted(r["provenance"]["disposition"] for r in rows["splits"])
    assert dispositions == ["discarded: low_reward", "kept", "kept"]


def test_manifest_then_reproduce_gives_the_same_bytes_in_a_new_process(exported: Path, tmp_path: Path) -> None:
    for fmt in EXPORTED:
        again = tmp_path / fmt
        res = subprocess.run(
            [sys.executable, "-m", "hermes_runner.export", "--reproduce", str(exported / fmt / MANIFEST_FILE),
             "--out", str(again)],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert res.returncode == 0 and "reproduced byte for byte" in res.stdout, res.stderr
        assert files(again) == files(exported / fmt), fmt
    # In place (the default): the deleted file comes back as it was.
    path = exported / "openai" / "trajectories.openai.jsonl"
    before = path.read_bytes()
    path.unlink()
    assert reproduce(exported / "openai" / MANIFEST_FILE).path == path and path.read_bytes() == before


def test_a_changed_run_dir_or_file_is_refused_by_name(run: Path, tmp_path: Path, capsys) -> None:
    copy = shutil.copytree(run, tmp_path / "run")
    out = tmp_path / "export"
    assert main([str(copy), "--to", "parquet", "--manifest", "--out", str(out)]) == 0
    manifest = out / MANIFEST_FILE
    capsys.readouterr()
    run_json = copy / "run.json"
    original = run_json.read_bytes()
    run_json.write_text(json.dumps({**json.loads(original), "run_name": "edited"}))
    assert main(["--reproduce", str(manifest)]) == 2
    assert f"{run_json}: changed since the export" in capsys.readouterr().err
    run_json.write_bytes(original)
    (copy / "rescored.jsonl").write_text("")
    assert main(["--reproduce", str(manifest)]) == 2
    assert f"{copy / 'rescored.jsonl'}: new in the run dir since the export" in capsys.readouterr().err
    (copy / "rescored.jsonl").unlink()
    body = json.loads(manifest.read_text())
    body["outputs"]["trajectories.parquet"] = "0" * 64  # as if another writer had made the file
    manifest.write_text(json.dumps(body))
    before = (out / "trajectories.parquet").read_bytes()
    assert main(["--reproduce", str(manifest)]) == 2
    assert f"{out / 'trajectories.parquet'}: the rebuilt file differs" in capsys.readouterr().err
    assert (out / "trajectories.parquet").read_bytes() == before  # a failed reproduction leaves the files alone


def test_all_of_a_sweep_exports_every_job(run: Path, tmp_path: Path, capsys) -> None:
    sweep = tmp_path / "sweep"
    for job in ("a=1", "a=2"):
        shutil.copytree(run, sweep / job)
    assert main([str(sweep), "--to", "all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 * len(EXPORTED)
    for job in ("a=1", "a=2"):
        for fmt in EXPORTED:
            assert (sweep / job / "export" / fmt / MANIFEST_FILE).is_file()
            assert any(line.startswith(f"{job} {fmt}: {sweep / job / 'export' / fmt}") for line in lines), lines
    # With --out: <out>/<job>/<format>.
    assert main([str(sweep), "--to", "openai", "--out", str(tmp_path / "o")]) == 0
    assert sorted(p.relative_to(tmp_path / "o").as_posix() for p in (tmp_path / "o").rglob("*.openai.jsonl")) == [
        f"{job}/openai/trajectories.openai.jsonl" for job in ("a=1", "a=2")
    ]


def test_rescored_rows_name_the_new_scorers_and_the_old_manifest_no_longer_reproduces(
    run: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    copy = shutil.copytree(run, tmp_path / "run")
    assert main([str(copy), "--to", "parquet", "--manifest", "--out", str(tmp_path / "before")]) == 0
    secret = "s3cr3t-pattern-value"  # a secret an override names: never written in the hash table or a manifest
    monkeypatch.setenv("HR_TEST_SECRET", secret)
    overrides = ["+scorer@scorers.exact=match", "scorers.exact.match.answer_pattern='${oc.env:HR_TEST_SECRET}'"]
    assert rescore.rescore(copy, overrides)["scored"] == 3
    capsys.readouterr()
    assert main(["--reproduce", str(tmp_path / "before" / MANIFEST_FILE)]) == 2
    assert f"{copy / 'ledger.jsonl'}: changed since the export" in capsys.readouterr().err
    assert main([str(copy), "--to", "parquet", "--manifest", "--out", str(tmp_path / "after")]) == 0
    before, after = (pq.read_table(tmp_path / d / "trajectories.parquet").to_pylist() for d in ("before", "after"))
    table = json.loads((tmp_path / "after" / MANIFEST_FILE).read_text())["hashes"]
    for old, new in zip(before, after, strict=True):
        old, new = old["provenance"], new["provenance"]
        assert [k for k in PROVENANCE_KEYS if old[k] != new[k]] == ["scorers"]
        assert set(table[new["scorers"]]["scorers"]) == {"answer", "exact"}
    for path in (copy / "hashes.jsonl", tmp_path / "after" / MANIFEST_FILE):
        assert path.exists() and secret not in path.read_text()


def test_a_run_dir_of_an_older_version_exports_what_it_can_tell(run: Path, tmp_path: Path) -> None:
    """Without invocations.jsonl the options come from run.json's data config; the version is unknown (null)."""
    copy = shutil.copytree(run, tmp_path / "run")
    (copy / "invocations.jsonl").unlink()
    assert main([str(copy), "--to", "parquet", "--out", str(tmp_path / "pq")]) == 0
    for row in pq.read_table(tmp_path / "pq" / "trajectories.parquet").to_pylist():
        p = row["provenance"]
        assert p["runner_version"] is None and p["prompt_template"] == digest(TEMPLATE)
        assert None not in (p["system_prompt"], p["tools"], p["sampling"], p["scorers"], p["filters"], p["model"])
