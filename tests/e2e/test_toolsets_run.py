"""Whole runs: unconfigured toolsets are reported and dropped or refused; all 17 distributions run with real tools."""

from __future__ import annotations

import logging

import psutil
import pytest

from hermes_runner.commands.job import load_distributions
from hermes_runner.testing.scripted_server import turn_of
from hermes_runner.tools.catalog import tools_for

from tests.helpers.local_site import LocalSite
from tests.helpers.run import CONF, read_jsonl, run_inprocess, write_jsonl
from tests.helpers.tool_harness import tool_overrides

NOT_CONFIGURED = {"web", "vision", "image_gen", "moa"}  # by hermes_runner/conf/tools/default.yaml


def _tool_names(toolsets) -> set[str]:
    return {t.name for t in tools_for(toolsets)}


def test_unconfigured_toolsets_are_dropped_and_reported(make_cfg, tmp_path, run_dir, server, caplog):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(3)])
    with caplog.at_level(logging.WARNING, logger="hermes_runner.tools.backends"):
        code, stats = run_inprocess(
            make_cfg("distribution=default", "tools.browser.executable=no-such-browser", dataset=ds), run_dir
        )
    assert code == 0 and stats["prompts"]["ok"] == 3
    dropped = stats["toolsets_unavailable"]
    assert set(dropped) == NOT_CONFIGURED | {"browser"}
    assert "no search backend" in dropped["web"] and "tools.vision.endpoint.model is not set" in dropped["vision"]
    assert "no-such-browser" in dropped["browser"]
    warning = "\n".join(r.getMessage() for r in caplog.records)
    assert "web: no search backend" in warning and "dropped from every prompt" in warning
    for row in read_jsonl(run_dir / "trajectories.jsonl"):
        assert row["toolsets_used"] == ["terminal", "file"]  # only what the model really had
    offered = {t["function"]["name"] for r in server.requests for t in r.body.get("tools", [])}
    assert offered == _tool_names(["terminal", "file"])
    assert set(stats["toolsets_sampled"]) == {"terminal", "file"}


def test_refuse_policy_and_nothing_left(make_cfg, tmp_path, run_dir, server, local_site):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    code, _ = run_inprocess(make_cfg("distribution=research", "tools.unavailable=refuse", dataset=ds), run_dir)
    assert code == 2 and not (run_dir / "trajectories.jsonl").exists() and server.requests == []
    code, _ = run_inprocess(make_cfg("distribution=minimal", dataset=ds), tmp_path / "run2")
    assert code == 2 and server.requests == []


def test_refuse_message_names_what_is_missing(tmp_path):
    from tests.helpers.run import run_cli

    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    res = run_cli(
        "model=local_server",
        "distribution=image_gen",
        "tools.unavailable=refuse",
        f"dataset_file={ds}",
        "run_name=refused",
        f"hydra.run.dir={tmp_path / 'out'}",
        "progress=false",
        env={"COLUMNS": "500"},
    )
    assert res.returncode == 2
    err = " ".join((res.stderr + res.stdout).split())
    assert "distribution 'image_gen' names toolsets whose backend is not configured" in err
    assert "image_gen: tools.image_gen.endpoint.model is not set" in err and "web: no search backend" in err
    assert "moa: tools.moa.reference_models is empty" in err and "tools.unavailable=drop" in err
    assert not (tmp_path / "out" / "trajectories.jsonl").exists()


def test_resume_notices_a_toolset_that_became_available(make_cfg, tmp_path, run_dir, local_site):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p0"}, {"prompt": "p1"}])
    code, _ = run_inprocess(make_cfg("distribution=terminal_web", "max_samples=1", dataset=ds), run_dir)
    assert code == 0
    configured = [o for o in tool_overrides(local_site) if "web" in o or "private" in o]
    code, _ = run_inprocess(make_cfg("distribution=terminal_web", *configured, dataset=ds), run_dir)
    assert code == 2  # the data would change silently
    code, stats = run_inprocess(
        make_cfg("distribution=terminal_web", "force_resume=true", *configured, dataset=ds), run_dir
    )
    assert code == 0 and stats["prompts"]["ok"] == 2
    used = [r["toolsets_used"] for r in read_jsonl(run_dir / "trajectories.jsonl")]
    assert used == [["terminal", "file"], ["terminal", "file", "web"]]


def _one_call_per_toolset(local_site: LocalSite) -> dict[str, tuple[str, dict]]:
    return {
        "terminal": ("terminal", {"command": "echo hi"}),
        "file": ("write_file", {"path": "notes.txt", "content": "x"}),
        "web": ("web_extract", {"urls": [local_site.url("/moon.html")]}),
        "vision": ("vision_analyze", {"image_url": local_site.url("/image.png"), "question": "What is it?"}),
        "image_gen": ("image_generate", {"prompt": "a fox", "aspect_ratio": "square"}),
        "moa": ("mixture_of_agents", {"user_prompt": "What is 6 x 7?"}),
        "browser": ("browser_navigate", {"url": local_site.url("/form.html")}),
    }


def _chromium_children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if "chrom" in p.name().lower()]


@pytest.mark.browser
@pytest.mark.parametrize("dist", [d.name for d in load_distributions()])
def test_every_distribution_runs_with_real_tools(dist, make_cfg, tmp_path, run_dir, server, local_site):
    calls = _one_call_per_toolset(local_site)
    names = {name for name, _ in calls.values()}

    def agent(body: dict, srv):
        if body.get("model") != "local-model":
            return None  # vision / MoA models: the scripted server's own replies
        offered = {t["function"]["name"] for t in body.get("tools", [])}
        if turn_of(body) == 0:
            todo = [{"name": n, "arguments": a} for n, a in calls.values() if n in offered]
            return srv.completion(body, {"reasoning": "Use every tool I have.", "tool_calls": todo})
        return srv.completion(body, {"reasoning": "They all answered.", "content": "Done."})

    server.handler = agent
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"{dist} task {i}"} for i in range(2)])
    cfg = make_cfg(
        f"distribution={dist}",
        "tools.image_gen.sizes.square=32x32",
        "num_workers=2",
        *tool_overrides(local_site),
        dataset=ds,
    )
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 2 and stats["toolsets_unavailable"] == {}
    probs = dict(cfg.distribution.toolsets)
    for row in read_jsonl(run_dir / "trajectories.jsonl"):
        used = row["toolsets_used"]
        assert set(used) <= set(probs) and {ts for ts, p in probs.items() if p >= 100} <= set(used)
        called = {n for n, s in row["tool_stats"].items() if s["count"]}
        assert called == {calls[ts][0] for ts in used}
        assert all(s["failure"] == 0 for s in row["tool_stats"].values()), row["tool_stats"]
    turn0 = [r for r in server.requests if r.body.get("model") == "local-model" and r.turn == 0]
    for r in turn0:
        assert names & {t["function"]["name"] for t in r.body["tools"]}
    assert _chromium_children() == []  # the browser is gone with the run


def test_list_distributions_shows_all_17():
    from tests.helpers.run import run_cli

    res = run_cli("list_distributions=true")
    assert res.returncode == 0
    listed = [
        line.split(":")[0] for line in res.stdout.splitlines() if line and not line.startswith(" ") and ":" in line
    ]
    assert len(load_distributions()) == 17
    assert {d.name for d in load_distributions()} <= set(listed)
    assert "browser_tasks: For browser-use task datasets" in res.stdout


def test_conf_tools_yaml_has_every_key_commented():
    lines = (CONF / "tools/default.yaml").read_text().splitlines()
    keyed = [ln for ln in lines if ":" in ln and not ln.lstrip().startswith(("#", "-"))]
    bare = [ln for ln in keyed if "#" not in ln and not ln.rstrip().endswith(":")]  # section headers may go bare
    assert bare == [], bare
