"""Each console command's argument handling and exit codes, in process, on small run dirs written by the package."""

from __future__ import annotations

import json
import sqlite3

import pytest

from hermes_runner.commands import cache, export, merge, report, score
from hermes_runner.model.cache import open_store
from hermes_runner.rundir.layout import REPORT

from tests.helpers import small_run


@pytest.fixture
def run_dir(tmp_path):
    return small_run.write(tmp_path / "run")


def usage_error(main, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_report_writes_the_page_and_prints_its_path(run_dir, tmp_path, capsys):
    assert report.main([str(run_dir)]) == 0
    assert capsys.readouterr().out.strip() == str(run_dir / REPORT) and (run_dir / REPORT).is_file()
    assert report.main([str(run_dir), "--out", str(tmp_path / "x.html"), "--max-trajectories", "0"]) == 0
    assert (tmp_path / "x.html").is_file()


def test_report_refuses_bad_limits_and_what_is_no_run(tmp_path, capsys):
    assert "--max-chars >= 100" in usage_error(report.main, [str(tmp_path), "--max-chars", "99"], capsys)
    assert report.main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith("error: ") and not (tmp_path / "missing").exists()


def test_export_prints_the_counts_and_refuses_what_it_cannot_export(run_dir, tmp_path, capsys):
    assert export.main([str(run_dir), "--to", "openai", "--out", str(tmp_path / "oa")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(str(tmp_path / "oa")) and "1 kept" in out
    rows = [json.loads(line) for line in (tmp_path / "oa" / "trajectories.openai.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and [m["role"] for m in rows[0]["messages"]][-1] == "assistant"
    assert "invalid choice" in usage_error(export.main, [str(run_dir), "--to", "xml"], capsys)
    assert "required" in usage_error(export.main, [str(run_dir)], capsys)
    assert export.main([str(tmp_path / "nowhere"), "--to", "openai"]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_merge_refuses_with_its_own_prefix(run_dir, tmp_path, capsys):
    assert "required" in usage_error(merge.main, [str(tmp_path / "o")], capsys)
    assert merge.main([str(tmp_path / "o"), str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.startswith("merge refused: ")
    assert merge.main([str(tmp_path / "o"), str(run_dir)]) == 2  # a run that never finished: no statistics.json
    assert "run it again" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_score_refuses_verify_and_a_dir_of_no_run(run_dir, tmp_path, capsys):
    assert "overrides" in usage_error(score.main, [str(run_dir)], capsys)
    assert score.main([str(run_dir), "+scorer@scorers.v=verify"]) == 2
    assert "sandbox, which was removed" in capsys.readouterr().err
    assert score.main([str(tmp_path), "+scorer@scorers.a=match"]) == 2
    assert "not a run directory of this runner" in capsys.readouterr().err


def test_cache_info_and_clear(tmp_path, capsys):
    d = tmp_path / "cache"
    assert cache.main(["info", "--dir", str(d)]) == 0 and "no response cache" in capsys.readouterr().out
    with open_store(d) as store:
        store.set("k", b"v" * 3000)
    assert cache.main(["info", "--dir", str(d)]) == 0 and "1 replies" in capsys.readouterr().out
    assert cache.main(["clear", "--dir", str(d)]) == 0 and "1 replies removed" in capsys.readouterr().out
    assert "invalid choice" in usage_error(cache.main, ["drop"], capsys)


def test_cache_clear_removes_an_unreadable_cache_and_info_fails_on_it(tmp_path, capsys):
    d = tmp_path / "cache"
    d.mkdir()
    (d / "cache.db").write_bytes(b"not a database" * 100)
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(d / "cache.db").execute("select 1 from sqlite_master").fetchall()
    assert cache.main(["info", "--dir", str(d)]) == 1
    assert capsys.readouterr().err.startswith(f"error: the response cache at {d} cannot be opened")
    assert cache.main(["clear", "--dir", str(d)]) == 0 and "unreadable" in capsys.readouterr().out
    assert not (d / "cache.db").exists()
