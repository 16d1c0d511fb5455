"""The defaults fit the default model, every model option is honoured or refused, a run that keeps
nothing says so and exits 6."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_runner.config import SERVED
from hermes_runner.errors import ConfigError
from hermes_runner.model.serve import check_model, server_argv
from hermes_runner.run.discards import NOTHING_KEPT

from tests.helpers.run import ROOT, base_overrides, compose_cfg, read_jsonl, run_cli, run_inprocess, script, write_jsonl

BARE = {"content": "a plain answer, no reasoning"}


def test_the_default_model_brings_the_filters_it_needs():
    """SmolLM2 writes no reasoning: its config picks filters=reasoning_optional; other models keep the default."""
    assert compose_cfg([]).filters.require_reasoning is False
    assert compose_cfg(["+experiment=quickstart"]).filters.require_reasoning is False
    for other in ("openai", "openrouter", "local_server"):
        assert compose_cfg([f"model={other}"]).filters.require_reasoning is True
    # what the user says last wins, as for any group
    assert compose_cfg(["filters.require_reasoning=true"]).filters.require_reasoning is True
    assert compose_cfg(["filters=default"]).filters.require_reasoning is True
    assert compose_cfg(["+experiment=training_data"]).filters.require_reasoning is True


def test_base_url_on_a_config_that_serves_its_own_model_is_refused_before_anything_starts(tmp_path):
    """The issue's command: the URL used to be ignored and SmolLM2 answered under the name X."""
    res = run_cli(
        "model.name=X", "model.base_url=http://127.0.0.1:9/v1", "run_name=r", f"hydra.run.dir={tmp_path / 'run'}",
        "progress=false", env={"COLUMNS": "400"},
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    err = " ".join((res.stdout + res.stderr).split())
    assert "model.base_url=http://127.0.0.1:9/v1 conflicts with a model config that serves its own model" in err
    assert "model=local_server model.base_url=http://127.0.0.1:9/v1" in err
    assert "starting model server" not in err and not (tmp_path / "run" / "model_server.log").exists()


def test_the_named_group_does_what_the_error_says(server, tmp_path):
    """model=local_server with the URL and name: that server answers, under that name."""
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": script({"reasoning": "r", "content": "a"})}])
    cfg = compose_cfg([*base_overrides(server, tmp_path), "model.name=X", f"dataset_file={ds}", "run_name=r"])
    code, stats = run_inprocess(cfg, tmp_path / "run")
    assert code == 0 and stats["prompts"]["ok"] == 1 and stats["model"] == "X"
    assert [r.body["model"] for r in server.requests] == ["X"]
    assert read_jsonl(tmp_path / "run" / "trajectories.jsonl")[0]["metadata"]["model"] == "X"


def test_metadata_model_is_the_model_that_answered(server, tmp_path):
    """A router (OpenRouter's `openrouter/auto`) answers with another model: the row names the one that answered."""
    steps = ({"tool_calls": [{"name": "terminal", "arguments": {"command": "echo hi"}}], "model": "vendor/picked-a"},
             {"content": "done", "reasoning": "r", "model": "vendor/picked-b"})  # fmt: skip
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": script(*steps)}])
    overrides = [*base_overrides(server, tmp_path), "model.name=openrouter/auto", "distribution=terminal_only"]
    code, stats = run_inprocess(compose_cfg([*overrides, f"dataset_file={ds}", "run_name=r"]), tmp_path / "run")
    assert code == 0 and {r.body["model"] for r in server.requests} == {"openrouter/auto"}
    assert read_jsonl(tmp_path / "run" / "trajectories.jsonl")[0]["metadata"]["model"] == "vendor/picked-b"


def gguf_cfg(tmp_path: Path, *overrides: str):
    gguf = tmp_path / "Qwen2.5-1.5B-Instruct.Q4_K_M.gguf"
    gguf.write_bytes(b"GGUF")
    return compose_cfg(["model=gguf", f"model.serve.model_path={gguf}", *overrides])


def test_a_served_file_names_the_model(tmp_path):
    """Sent, served (the server's alias) and recorded under the file's name; any other name is refused."""
    cfg = gguf_cfg(tmp_path)
    assert cfg.model.name == SERVED
    check_model(cfg.model)
    assert cfg.model.name == "Qwen2.5-1.5B-Instruct.Q4_K_M"
    argv = server_argv(cfg.model, 1234)
    assert argv[argv.index("--model_alias") + 1] == "Qwen2.5-1.5B-Instruct.Q4_K_M"
    check_model(cfg.model)  # idempotent: the file's own name is accepted

    cfg = gguf_cfg(tmp_path, "model.name=my-label")
    with pytest.raises(ConfigError) as exc:
        check_model(cfg.model)
    msg = str(exc.value)
    assert "model.name=my-label conflicts" in msg and "Qwen2.5-1.5B-Instruct.Q4_K_M" in msg
    assert "model=local_server model.base_url=<its URL> model.name=my-label" in msg


def test_served_options_that_contradict_each_other_are_refused(tmp_path):
    cfg = gguf_cfg(tmp_path, "model.serve.enabled=false")
    with pytest.raises(ConfigError, match="model.base_url=served but this model config starts no server"):
        check_model(cfg.model)
    cfg = gguf_cfg(tmp_path, "model.base_url=http://10.0.0.1:8000/v1")
    with pytest.raises(ConfigError, match="choose the group for it: model=local_server"):
        check_model(cfg.model)
    # a server the config starts but that serves no file (vLLM): model.name is what it loads, kept
    cfg = compose_cfg(["model=vllm_serve", "model.name=Qwen/Qwen3-0.6B"])
    check_model(cfg.model)
    assert cfg.model.name == "Qwen/Qwen3-0.6B"
    # serve.enabled=false with a URL: the URL is used, nothing is started; the model needs a name then
    cfg = gguf_cfg(tmp_path, "model.serve.enabled=false", "model.base_url=http://10.0.0.1:8000/v1")
    with pytest.raises(ConfigError, match="set model.name=<the model id http://10.0.0.1:8000/v1 expects>"):
        check_model(cfg.model)
    cfg = gguf_cfg(tmp_path, "model.serve.enabled=false", "model.base_url=http://10.0.0.1:8000/v1", "model.name=q")
    check_model(cfg.model)
    assert cfg.model.name == "q"


def test_a_run_that_keeps_nothing_says_why_and_exits_6(server, tmp_path):
    rows = [{"prompt": script(BARE, text=f"bare {i}")} for i in range(3)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    args = [*base_overrides(server, tmp_path), f"dataset_file={ds}", "run_name=r", f"hydra.run.dir={tmp_path / 'run'}"]
    res = run_cli(*args, env={"COLUMNS": "400"})
    assert res.returncode == NOTHING_KEPT == 6, res.stdout + res.stderr
    out = " ".join((res.stdout + res.stderr).split())
    assert "NOTHING KEPT: all 3 finished trajectories were discarded, 3 of them as no_reasoning" in out
    assert "rerun with filters.require_reasoning=false to keep them" in out
    assert "NOTHING KEPT" in (tmp_path / "run" / "run.log").read_text()
    # the override it names keeps them (a fresh run: the discards of a run are final)
    res = run_cli(*args[:-1], f"hydra.run.dir={tmp_path / 'run2'}", "filters.require_reasoning=false")
    assert res.returncode == 0, res.stdout + res.stderr
    assert len(read_jsonl(tmp_path / "run2" / "trajectories.jsonl")) == 3


def test_one_kept_trajectory_is_enough_for_exit_0(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": script(BARE, text="bare")}, {"prompt": "good"}])
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 1 and stats["prompts"]["discarded"] == 1


def test_readme_first_screen_is_two_commands():
    readme = (ROOT / "README.md").read_text()
    first = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in first.strip().splitlines()] == [["make", "run"], ["make", "test"]]
