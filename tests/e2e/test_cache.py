"""The response cache in real runs: reruns in new dirs pay nothing, samples stay k draws, a broken cache is only
misses, no secret reaches its files, and a kill -9 loop pays each call once (up to the calls in flight)."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import diskcache
import pytest

from tests.helpers.crash import cli_args, kill_mid_run, terminal_records
from tests.helpers.run import read_jsonl, run_cli, run_inprocess, script, write_jsonl

STEPS = [
    *(
        {"tool_calls": [{"name": "terminal", "arguments": {"command": f"echo step {i}"}}], "reasoning": "r"}
        for i in (1, 2)
    ),
    {"content": "the answer", "reasoning": "done"},
]  # three calls per prompt, tool results that do not vary
CALLS_PER_PROMPT = 3


def rows(n: int, tag: str = "row") -> list[dict]:
    return [{"prompt": script(*STEPS, text=f"{tag} {i}")} for i in range(n)]


def on(tmp_path: Path, *extra: str) -> list[str]:
    """The cache on, in a dir of this test (base_overrides turn it off)."""
    return ["cache=readwrite", f"cache.dir={tmp_path / 'cache'}", "distribution=terminal_only", *extra]


def conversations(run_dir: Path) -> dict[tuple[str, int], list]:
    return {(e["metadata"]["prompt_key"], e["metadata"]["sample_index"]): e["conversations"] for e in read_jsonl(
        run_dir / "trajectories.jsonl")}  # fmt: skip


def test_a_rerun_into_a_new_dir_with_other_filters_and_layout_makes_no_model_call(make_cfg, tmp_path, server):
    ds = write_jsonl(tmp_path / "d.jsonl", rows(4))
    code, first = run_inprocess(make_cfg(*on(tmp_path), dataset=ds), tmp_path / "one")
    paid = len(server.requests)
    assert code == 0 and paid == 4 * CALLS_PER_PROMPT == first["api_calls"] and first["cache"]["hits"] == 0

    other = make_cfg(*on(tmp_path, "filters.require_reasoning=false", "filters.hallucinated_tools=keep"), dataset=ds)
    code, again = run_inprocess(other, tmp_path / "two")
    assert code == 0 and len(server.requests) == paid  # not one call
    assert again["prompts"]["ok"] == 4 and again["api_calls"] == 0 and again["usage"]["total_tokens"] == 0
    assert again["cache"] == {
        "mode": "readwrite", "hits": paid, "tokens_saved": first["usage"]["total_tokens"], "cost_saved_usd": 0.0,
    }  # fmt: skip
    assert conversations(tmp_path / "two") == conversations(tmp_path / "one")  # the same trajectories
    entries = read_jsonl(tmp_path / "two" / "trajectories.jsonl")
    assert [e["api_calls"] for e in entries] == [CALLS_PER_PROMPT] * 4  # the entry tells its conversation's calls
    page = (tmp_path / "two" / "report.html").read_text()
    assert "Cache hits" in page and "calls replayed, not paid again" in page
    timeline = read_jsonl(tmp_path / "two" / "timeline.jsonl")
    assert all(c.get("cached") for t in timeline for c in t["calls"] if c["k"] == "model")

    code, structured = run_inprocess(make_cfg(*on(tmp_path, "output.layout=structured"), dataset=ds), tmp_path / "3")
    assert code == 0 and len(server.requests) == paid and structured["cache"]["hits"] == paid


def test_the_budget_is_charged_only_for_calls_made(make_cfg, tmp_path, server):
    ds = write_jsonl(tmp_path / "d.jsonl", rows(3))
    assert run_inprocess(make_cfg(*on(tmp_path), dataset=ds), tmp_path / "one")[0] == 0
    paid = len(server.requests)
    cfg = make_cfg(*on(tmp_path, "limits.max_tokens_total=1", "num_workers=1"), dataset=ds)
    code, stats = run_inprocess(cfg, tmp_path / "two")  # one paid token would stop it (exit 3)
    assert code == 0 and stats["prompts"]["ok"] == 3 and stats["stopped_by_budget"] is None
    assert len(server.requests) == paid and stats["cache"]["hits"] == paid
    calls = tmp_path / "two" / "usage.jsonl"
    assert not calls.exists() or read_jsonl(calls) == []  # no call started, none recorded


def test_samples_at_a_temperature_stay_distinct_draws(make_cfg, tmp_path, server):
    ds = write_jsonl(tmp_path / "d.jsonl", rows(2))
    cfg = make_cfg(*on(tmp_path, "samples_per_prompt=3", "model.temperature=0.8"), dataset=ds)
    code, stats = run_inprocess(cfg, tmp_path / "one")
    assert code == 0 and stats["prompts"]["ok"] == 6
    # every sample asked the endpoint itself: 2 rows x 3 samples x 3 calls, none handed another sample's reply
    assert len(server.requests) == 2 * 3 * CALLS_PER_PROMPT and stats["cache"]["hits"] == 0
    assert {r.body["temperature"] for r in server.requests} == {0.8}
    first_turns = [r for r in server.requests if r.turn == 0]
    assert len(first_turns) == 6 and len({json.dumps(r.body, sort_keys=True) for r in first_turns}) == 2
    code, again = run_inprocess(cfg, tmp_path / "two")  # and each sample replays its own draws
    assert code == 0 and len(server.requests) == 18 and again["cache"]["hits"] == 18
    assert conversations(tmp_path / "two") == conversations(tmp_path / "one")


def test_a_corrupt_cache_is_only_misses_with_a_warning(make_cfg, tmp_path, server, caplog):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "cache.db").write_bytes(random.Random(7).randbytes(64 * 1024))
    ds = write_jsonl(tmp_path / "d.jsonl", rows(3))
    with caplog.at_level(logging.WARNING):
        code, stats = run_inprocess(make_cfg(*on(tmp_path), dataset=ds), tmp_path / "run")
    assert code == 0 and stats["prompts"]["ok"] == 3 and len(server.requests) == 3 * CALLS_PER_PROMPT
    warned = [r.getMessage() for r in caplog.records if "response cache" in r.getMessage()]
    assert len(warned) == 1 and "cannot be opened" in warned[0] and "hermes-cache clear" in warned[0]


def test_a_full_cache_is_only_misses_with_a_warning(make_cfg, tmp_path, server, caplog):
    with diskcache.Cache(str(tmp_path / "cache"), sqlite_max_page_count=12) as full:  # SQLite's "database is full"
        for i in range(200):
            try:
                full.set(f"filler{i}", "x" * 3000)
            except Exception:  # noqa: BLE001 - full now
                break
    ds = write_jsonl(tmp_path / "d.jsonl", rows(3))
    with caplog.at_level(logging.WARNING):
        code, stats = run_inprocess(make_cfg(*on(tmp_path), dataset=ds), tmp_path / "run")
    assert code == 0 and stats["prompts"]["ok"] == 3
    warned = [r.getMessage() for r in caplog.records if "response cache" in r.getMessage()]
    assert len(warned) == 1 and "cannot be written" in warned[0]
    # a size limit that keeps nothing: every call is paid, the run is as without a cache
    tiny = make_cfg(*on(tmp_path, "cache.size_limit=1", f"cache.dir={tmp_path / 'tiny'}"), dataset=ds)
    before = len(server.requests)
    assert run_inprocess(tiny, tmp_path / "tiny-run")[0] == 0
    assert run_inprocess(tiny, tmp_path / "tiny-run2")[0] == 0
    assert len(server.requests) - before == 2 * 3 * CALLS_PER_PROMPT


def test_no_key_or_header_reaches_the_cache(make_cfg, tmp_path, server, monkeypatch):
    secret, header = "sk-cache-test-0123456789abcdef", "hdr-cache-test-fedcba9876543210"
    monkeypatch.setenv("HR_CACHE_TEST_KEY", secret)
    ds = write_jsonl(tmp_path / "d.jsonl", rows(3))
    cfg = make_cfg(*on(tmp_path, "model.api_key_env=HR_CACHE_TEST_KEY", f"+model.default_headers.X-Test={header}"),
                   dataset=ds)  # fmt: skip
    assert run_inprocess(cfg, tmp_path / "run")[0] == 0
    sent = {k.lower(): v for k, v in server.requests[0].headers.items()}
    assert sent["authorization"] == f"Bearer {secret}" and sent["x-test"] == header  # (they were sent)
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert any(p.name == "cache.db" for p in files)
    with diskcache.Cache(str(tmp_path / "cache")) as kept:
        assert len(kept) == 3 * CALLS_PER_PROMPT
    for p in files:
        data = p.read_bytes()
        assert secret.encode() not in data and header.encode() not in data, p


def test_the_command_line_group_and_the_cache_command(server, tmp_path):
    bad = run_cli("cache=bogus", "dry_run=true")
    assert bad.returncode == 2 and "readwrite" in bad.stderr and "off" in bad.stderr
    typo = run_cli("cache.mode=of", "dry_run=true")
    assert typo.returncode == 2 and "readwrite" in typo.stderr
    ds = write_jsonl(tmp_path / "d.jsonl", rows(2))
    args = [
        "model=local_server", f"model.base_url={server.url}", f"dataset_file={ds}", "run_name=c", "progress=false",
        f"hydra.run.dir={tmp_path / 'run'}", f"sandbox.local.root={tmp_path / 'sb'}", "distribution=terminal_only",
    ]  # fmt: skip
    env = {"HERMES_RUNNER_CACHE_DIR": str(tmp_path / "default-cache")}  # the default dir (cache: readwrite)
    done = run_cli(*args, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    info = run_cli_module("info", env=env)
    assert info.returncode == 0 and f"{2 * CALLS_PER_PROMPT} replies" in info.stdout
    again = run_cli(*args[:-3], f"hydra.run.dir={tmp_path / 'run2'}", f"sandbox.local.root={tmp_path / 'sb'}",
                    "distribution=terminal_only", env=env)  # fmt: skip
    assert again.returncode == 0 and "Response cache: 6 calls replayed" in again.stdout
    cleared = run_cli_module("clear", env=env)
    assert cleared.returncode == 0 and "6 replies removed" in cleared.stdout


def run_cli_module(*args: str, env: dict):
    import os
    import subprocess

    from tests.helpers.run import ROOT, command

    return subprocess.run(
        [*command("cache"), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ, **env},
    )  # fmt: skip


@pytest.mark.slow
def test_kill_minus_9_and_resume_replays_the_paid_calls(server, tmp_path, capsys):
    """A kill -9 loop with and without the cache: model calls made vs distinct calls needed. With it, only the
    calls in flight at a kill (asked, not yet answered and stored) are paid twice."""
    n, workers = 16, 4
    needed = n * CALLS_PER_PROMPT
    server.latency = 0.15
    figures = {}
    for mode in ("readwrite", "off"):
        ds = write_jsonl(tmp_path / f"{mode}.jsonl", rows(n, tag=mode))
        run_dir = tmp_path / f"run-{mode}"
        extra = [f"cache={mode}", f"cache.dir={tmp_path / 'cache'}", "distribution=terminal_only",
                 f"num_workers={workers}", "batch_size=4"]  # fmt: skip
        before = len(server.requests)
        args = cli_args(server, tmp_path, ds, run_dir, *extra)
        kills, in_flight = kill_mid_run(args, tmp_path / f"{mode}.log", server, random.Random(21), 4, (4, 10))
        made = len(server.requests) - before
        assert len({(r.prompt, r.turn) for r in server.requests[before:]}) == needed
        terms = terminal_records(run_dir)
        assert kills == 4 and len(terms) == n and set(terms.values()) == {1}
        figures[mode] = (made, kills, in_flight)
        if mode == "readwrite":
            # (one call per kill of slack: answered by the server, killed before it was stored)
            assert needed <= made <= needed + in_flight + kills, (made, needed, in_flight)
            stats = json.loads((run_dir / "statistics.json").read_text())
            assert stats["cache"]["hits"] > 0 and stats["api_calls"] + stats["cache"]["hits"] >= needed
    assert figures["off"][0] >= figures["readwrite"][0]
    with capsys.disabled():
        for mode, (made, kills, in_flight) in figures.items():
            print(f"\ncache={mode}: {made} model calls made for {needed} distinct calls needed "
                  f"({kills} kills, {in_flight} calls in flight at them)")  # fmt: skip
