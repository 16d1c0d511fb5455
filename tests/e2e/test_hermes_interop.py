"""Hermes interop both ways, with hermes-agent 0.19.0 itself (side venv tests/consumers/hermes_agent.txt).

Our run dir -> the original's resume scan and final merge keep every row. The original's run dir (written by
its own BatchRunner against the scripted server) -> our runner imports it without paying again, or refuses.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import datasets
import pytest

from hermes_runner.dataset import read_prompts

from tests.helpers.consumers import run_consumer
from tests.helpers.run import read_jsonl, run_inprocess, script, write_jsonl

# Prelude of every script run in the hermes-agent venv: a private HOME, no lazy pip installs, then its modules.
HERMES_ENV = """
import json, os, sys
home = sys.argv[1]
os.makedirs(home, exist_ok=True)
os.environ.update(HOME=home, HERMES_HOME=os.path.join(home, ".hermes"), HERMES_DISABLE_LAZY_INSTALLS="1")
os.chdir(home)
"""

REGISTRY = (
    HERMES_ENV
    + """
import batch_runner
from toolsets import validate_toolset
names = json.loads(sys.argv[2])
print(json.dumps({"tools": sorted(batch_runner.ALL_POSSIBLE_TOOLS),
                  "toolsets": {t: bool(validate_toolset(t)) for t in names}}))
"""
)

# Its resume detection (content scan + dataset filter), then its own resume run: the prompts left by content
# are skipped by the index checkpoint (ours lists discarded prompts too), so it only merges. Any model call
# would go to a closed port and fail the prompt.
RESUME_AND_MERGE = (
    HERMES_ENV
    + """
import contextlib, io
from batch_runner import BatchRunner
dataset, run_name = sys.argv[2], sys.argv[3]
r = BatchRunner(dataset_file=dataset, batch_size=10, run_name=run_name, num_workers=1,
                base_url="http://127.0.0.1:9/v1", api_key="none")
done = r._scan_completed_prompts_by_content()
remaining, skipped = r._filter_dataset_by_completed(done)
out = io.StringIO()
with contextlib.redirect_stdout(out):
    r.run(resume=True)
print(json.dumps({"remaining": [i for i, _ in remaining], "skipped": skipped, "log": out.getvalue()}))
"""
)


def hermes(code: str, home: Path, *args: str) -> dict:
    proc = run_consumer("hermes_agent", code, str(home), *args)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_tool_names_are_hermes_0_19_names(tmp_path):
    from hermes_runner.tools.catalog import NOT_IN_HERMES, all_tools, stats_names, toolset_names

    ours = sorted(all_tools())
    facts = hermes(REGISTRY, tmp_path / "home", json.dumps(toolset_names()))
    theirs = set(facts["tools"])
    assert "browser_close" not in theirs and "mixture_of_agents" not in theirs  # the facts this relies on
    # Every tool of ours has its name in 0.19.0's registry, except the documented ones without a counterpart.
    assert {n for n in ours if n not in theirs} == set(NOT_IN_HERMES)
    # The zero-fill of a run that cannot offer those: only names its merge accepts.
    default_stats = stats_names(t for t in toolset_names() if t != "moa")
    assert set(default_stats) <= theirs and set(default_stats) == set(ours) - NOT_IN_HERMES
    assert "mixture_of_agents" in stats_names(["moa"])  # a run that offers moa: same keys on all its rows
    assert {t for t, ok in facts["toolsets"].items() if not ok} == {"moa"}


@pytest.mark.parametrize("scorer", [[], ["+scorer@scorers.answer=match"]], ids=["unscored", "scored"])
def test_our_run_dir_survives_hermes_resume_and_merge(make_cfg, tmp_path, run_dir, server, scorer):
    rows = [
        {"prompt": "List the files."},  # scripted default: a terminal call, then an answer
        {"prompt": script({"content": "Four.", "reasoning": "2+2"}, text="What is 2+2?"), "target": "Four"},
        {"prompt": script({"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}],
                           "reasoning": "write"}, {"content": "Done.", "reasoning": "ok"}, text="Write a.txt")},
        {"prompt": script(*[{"tool_calls": [{"name": "terminal", "arguments": {"command": "true"}}],
                             "reasoning": "loop"}] * 3, text="Loop forever")},  # stopped by max_turns
        {"prompt": script({"content": "no reasoning here"}, text="Discard me")},  # discarded: never in batches
    ]  # fmt: skip
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    code, stats = run_inprocess(make_cfg("distribution=terminal_only", "max_turns=2", *scorer, dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 4 and stats["prompts"]["discarded"] == 1
    ours = read_jsonl(run_dir / "trajectories.jsonl")
    assert sorted(e["reward"] for e in ours) == [0.0, 0.0, 0.0, 1.0 if scorer else 0.0]
    assert {n for e in ours for n, s in e["tool_stats"].items() if s["count"]} == {"terminal", "write_file"}

    home = tmp_path / "home"
    shutil.copytree(run_dir, home / "data" / "t")
    out = hermes(RESUME_AND_MERGE, home, str(ds), "t")
    assert out["remaining"] == [4]  # only the discarded prompt (no batch line; the original re-runs those)
    assert sorted(out["skipped"]) == [0, 1, 2, 3]
    assert "Filtering" not in out["log"] and "Already completed" in out["log"], out["log"]
    merged = read_jsonl(home / "data" / "t" / "trajectories.jsonl")
    assert sorted(e["prompt_index"] for e in merged) == sorted(e["prompt_index"] for e in ours)
    assert sorted(json.dumps(e, sort_keys=True) for e in merged) == sorted(json.dumps(e, sort_keys=True) for e in ours)


# The original's own BatchRunner, run for real against the scripted server: the foreign run dir.
HERMES_RUN = (
    HERMES_ENV
    + """
from batch_runner import BatchRunner
dataset, run_name, url, n = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
BatchRunner(dataset_file=dataset, batch_size=2, run_name=run_name, distribution="terminal_only", base_url=url,
            api_key="sk-test", model="scripted", num_workers=1, max_iterations=3, max_samples=n).run()
print(json.dumps({"ok": True}))
"""
)

FOREIGN_ROWS = [
    {"prompt": "Show the date."},  # scripted default: a terminal call (with reasoning), then an answer
    {"prompt": script({"content": "Four.", "reasoning": "2+2"}, text="What is 2+2?")},
    {"prompt": script({"content": "plain"}, text="No reasoning")},  # the original discards it: checkpoint only
    {"prompt": script({"tool_calls": [{"name": "terminal", "arguments": {"command": "echo hi"}}],
                       "reasoning": "run it"}, {"content": "It printed hi.", "reasoning": "ok"}, text="Say hi")},
]  # fmt: skip
FOREIGN_ROWS += [
    {"prompt": FOREIGN_ROWS[1]["prompt"], "id": "again"},  # the same prompt in another row: its own trajectory
    {"prompt": "A prompt the original never ran."},
]
NEW = FOREIGN_ROWS[5]


@pytest.fixture(scope="module")
def hermes_dir(tmp_path_factory, _server) -> Path:
    """A run dir written by hermes-agent 0.19.0's BatchRunner over the first 5 rows (3 batches)."""
    home = tmp_path_factory.mktemp("hermes")
    ds = write_jsonl(home / "d.jsonl", FOREIGN_ROWS)
    _server.reset()
    hermes(HERMES_RUN, home, str(ds), "orig", _server.url, "5")
    out = home / "data" / "orig"
    assert sorted(p.name for p in out.iterdir()) == [
        "batch_0.jsonl", "batch_1.jsonl", "batch_2.jsonl", "checkpoint.json", "statistics.json", "trajectories.jsonl"
    ]  # fmt: skip
    assert json.loads((out / "checkpoint.json").read_text())["completed_prompts"] == [0, 1, 2, 3, 4]
    assert len(read_jsonl(out / "trajectories.jsonl")) == 4  # "No reasoning" was discarded
    return out


ORIGINAL_FILES = ("checkpoint.json", "statistics.json", "trajectories.jsonl")  # the files our runner rewrites


def _shape(value: object) -> object:
    """The keys and JSON types of a row, recursively (lists by their first element)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__


def snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}


def foreign_copy(hermes_dir: Path, run_dir: Path) -> dict[str, bytes]:
    shutil.copytree(hermes_dir, run_dir)
    return snapshot(run_dir)


def test_hermes_run_dir_resumes_here_without_paying_again(make_cfg, tmp_path, run_dir, server, hermes_dir):
    theirs = foreign_copy(hermes_dir, run_dir)
    ds = write_jsonl(tmp_path / "d.jsonl", FOREIGN_ROWS)
    code, stats = run_inprocess(make_cfg("distribution=terminal_only", dataset=ds), run_dir)
    assert code == 0
    assert {r.prompt for r in server.requests} == {NEW["prompt"]}  # only the prompt it never ran
    assert stats["prompts"]["ok"] == 5
    assert stats["prompts"]["discarded"] == 1 and stats["discarded_by_reason"] == {"no_reasoning": 1}
    # Nothing of theirs overwritten or lost: their batch files in place, the files we rewrite moved aside.
    assert snapshot(run_dir / "hermes_original") == {k: theirs[k] for k in ORIGINAL_FILES}
    assert {k: v for k, v in snapshot(run_dir).items() if k in theirs and k not in ORIGINAL_FILES} == {
        k: v for k, v in theirs.items() if k not in ORIGINAL_FILES
    }
    merged = read_jsonl(run_dir / "trajectories.jsonl")
    assert [e["prompt_index"] for e in merged] == [0, 1, 3, 4, 5]
    keys = {p.index: p.key for p in read_prompts(ds)}
    imported = {r["index"]: r["key"] for r in read_jsonl(run_dir / "ledger.jsonl") if r.get("imported")}
    assert imported == {i: keys[i] for i in range(5)}  # each to its own row, the repeated prompt's two included
    # Their rows in our keys and types (the same turns; their lines stay verbatim in their batch files), so the
    # whole file loads as one dataset, with the features the run wrote beside it.
    theirs_by_index = {e["prompt_index"]: e for e in read_jsonl(hermes_dir / "trajectories.jsonl")}
    turns = lambda e: [(t["from"], t["value"]) for t in e["conversations"]]  # noqa: E731
    for e in merged[:4]:
        assert turns(e) == turns(theirs_by_index[e["prompt_index"]]) and e["metadata"]["prompt_key"] in keys.values()
    assert len({json.dumps(_shape(e)) for e in merged}) == 1, [_shape(e) for e in merged]
    loaded = datasets.load_dataset(
        "json", data_files=str(run_dir / "trajectories.jsonl"), split="train", cache_dir=str(tmp_path / "hf")
    )
    written = json.loads((run_dir / "dataset_features.json").read_text())
    assert loaded.num_rows == 5 and loaded.features.to_dict() == written
    ckpt = json.loads((run_dir / "checkpoint.json").read_text())
    assert ckpt["completed_prompts"] == [0, 1, 2, 3, 4, 5] and ckpt["discarded_prompts"] == [2]
    calls = len(server.requests)
    assert run_inprocess(make_cfg("distribution=terminal_only", dataset=ds), run_dir)[0] == 0
    assert len(server.requests) == calls  # and again: nothing left to pay for
    # And back: the original's own resume of the adopted dir finds every prompt done and its merge keeps all rows.
    home = tmp_path / "home"
    shutil.copytree(run_dir, home / "data" / "t")
    out = hermes(RESUME_AND_MERGE, home, str(ds), "t")
    assert sorted(out["skipped"]) == [0, 1, 3, 4, 5] and "Filtering" not in out["log"], out["log"]
    assert sorted(e["prompt_index"] for e in read_jsonl(home / "data" / "t" / "trajectories.jsonl")) == [0, 1, 3, 4, 5]


def test_half_written_hermes_run_dir_is_refused_not_repaid(make_cfg, tmp_path, run_dir, server, hermes_dir, caplog):
    foreign_copy(hermes_dir, run_dir)
    batch = run_dir / "batch_1.jsonl"
    last = batch.read_bytes().splitlines(keepends=True)[-1]
    with batch.open("ab") as fp:
        fp.write(last[: len(last) // 2])  # killed while appending the next line
    before = snapshot(run_dir)
    ds = write_jsonl(tmp_path / "d.jsonl", FOREIGN_ROWS)
    code, _ = run_inprocess(make_cfg("distribution=terminal_only", dataset=ds), run_dir)
    assert code == 2 and not server.requests
    assert "batch_1.jsonl line 2 is half-written" in caplog.text
    assert snapshot(run_dir) == before  # nothing moved, written or lost (not even a .lock: issue 29)
    assert not (run_dir / "hermes_original").exists()


def test_hermes_run_dir_that_does_not_fit_the_dataset_is_refused(
    make_cfg, tmp_path, run_dir, server, hermes_dir, caplog
):
    before = foreign_copy(hermes_dir, run_dir)
    # A row inserted in front: the texts still match, but checkpoint index 2 (the discarded prompt) now names
    # another row.
    ds = write_jsonl(tmp_path / "d.jsonl", [NEW, *FOREIGN_ROWS[:4]])
    assert run_inprocess(make_cfg("distribution=terminal_only", dataset=ds), run_dir)[0] == 2
    assert "cannot tell which prompts they are" in caplog.text and not server.requests
    # Same, with both rows of the repeated prompt: their prompt_index no longer tells which trajectory is whose.
    ds = write_jsonl(tmp_path / "d.jsonl", [NEW, *FOREIGN_ROWS[:5]])
    assert run_inprocess(make_cfg("distribution=terminal_only", dataset=ds), run_dir)[0] == 2
    assert "cannot tell which one it belongs to" in caplog.text and not server.requests
    # Another dataset altogether.
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "something else"}])
    assert run_inprocess(make_cfg("distribution=terminal_only", dataset=ds), run_dir)[0] == 2
    assert "match no prompt of" in caplog.text and not server.requests
    assert not (run_dir / "ledger.jsonl").exists() and not (run_dir / "hermes_original").exists()
    assert snapshot(run_dir) == before


def test_import_cut_short_by_a_crash_is_redone(make_cfg, tmp_path, run_dir, server, hermes_dir):
    theirs = foreign_copy(hermes_dir, run_dir)
    (run_dir / "hermes_original").mkdir()  # a crash after the moves, before the ledger was written
    for name in ORIGINAL_FILES:
        (run_dir / name).rename(run_dir / "hermes_original" / name)
    (run_dir / "discarded.jsonl").write_bytes(b'{"prompt_index": 2, "conver')  # and mid-way through the tombstones
    ds = write_jsonl(tmp_path / "d.jsonl", FOREIGN_ROWS)
    code, stats = run_inprocess(make_cfg("distribution=terminal_only", dataset=ds), run_dir)
    assert code == 0 and {r.prompt for r in server.requests} == {NEW["prompt"]}
    assert stats["prompts"]["ok"] == 5 and stats["discarded_by_reason"] == {"no_reasoning": 1}
    assert snapshot(run_dir / "hermes_original") == {k: theirs[k] for k in ORIGINAL_FILES}


def test_dry_run_counts_the_import_and_changes_nothing(make_cfg, tmp_path, run_dir, server, hermes_dir):
    from hermes_runner.run.invocation import Run

    before = foreign_copy(hermes_dir, run_dir)
    ds = write_jsonl(tmp_path / "d.jsonl", FOREIGN_ROWS)
    run = Run(make_cfg("distribution=terminal_only", "dry_run=true", dataset=ds), run_dir)
    try:
        plan = run.prepare()
    finally:
        run.store.unlock()
    assert (plan.done, plan.to_run) == (5, 1)
    after = snapshot(run_dir)
    assert {k: after[k] for k in before} == before and not (run_dir / "hermes_original").exists()
    assert set(after) - set(before) <= {".lock", "rejected.jsonl"}
