"""agent=external: real agent programs in the local sandbox, their model calls through the recording proxy to the
scripted server; the trajectory rebuilt from the calls, scored in the same sandbox."""

from __future__ import annotations

import json
import random
import zipfile
from pathlib import Path

import pytest

from hermes_runner.sandbox.docker import orphans as docker_orphans

from tests.helpers import crash
from tests.helpers.consumers import VENVS, consumer_python
from tests.helpers.run import read_jsonl, run_inprocess, script, write_jsonl
from tests.helpers.tiny_agent import TINY

pytestmark = [pytest.mark.e2e, pytest.mark.bwrap]


def _entries(run_dir: Path) -> list[dict]:
    return [e for f in sorted(run_dir.glob("batch_*.jsonl")) for e in read_jsonl(f)]


def test_tiny_agent_runs_in_the_sandbox_through_the_proxy(make_cfg, server, tmp_path, run_dir):
    steps = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi > out.txt; cat out.txt"}}]},
        {"content": "All done."},
    ]
    rows = [{"prompt": script(*steps, text="make a file"), "verify": "grep -qx hi out.txt"}]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = make_cfg(*TINY, "cache=readwrite", "+scorer@scorers.verify=verify", dataset=data)
    code, _ = run_inprocess(cfg, run_dir)
    assert code == 0, (run_dir / "failures.jsonl").read_text()
    [e] = _entries(run_dir)
    turns = [(t["from"], t["value"]) for t in e["conversations"]]
    assert turns[0][0] == "system" and "You are tiny-agent." in turns[0][1] and '"name": "bash"' in turns[0][1]
    assert [w for w, _ in turns[1:]] == ["human", "gpt", "tool", "gpt"]
    assert "<tool_call>" in turns[2][1] and "echo hi > out.txt" in turns[2][1]
    assert json.loads(turns[3][1].split("\n", 1)[1].rsplit("\n", 1)[0])["content"] == "hi\n"
    assert turns[4][1].endswith("All done.")
    assert e["completed"] and e["stop_reason"] == "final_answer" and e["api_calls"] == 2
    assert e["tool_stats"] == {"bash": {"count": 1, "success": 1, "failure": 0}}
    assert e["metadata"]["agent"] == "tiny-agent"
    assert e["reward"] == 1.0  # verify ran in the sandbox the program left
    # the calls went through the run's model path: usage.jsonl / timeline.jsonl have them
    assert len(server.calls_for("make a file")) == 2
    [timeline] = read_jsonl(run_dir / "timeline.jsonl")
    assert [(c["k"], c["finish"]) for c in timeline["calls"]] == [("model", "tool_calls"), ("model", "stop")]
    ends = [r for r in read_jsonl(run_dir / "usage.jsonl") if r["event"] == "end"]
    assert sum(r["usage"]["total_tokens"] for r in ends) == e["usage"]["total_tokens"] > 0 and len(ends) == 2
    # the response cache answers the program's calls too: a second run replays them, no call is made
    again = tmp_path / "again"
    code, _ = run_inprocess(make_cfg(*TINY, "cache=readwrite", "+scorer@scorers.verify=verify", dataset=data), again)
    assert code == 0 and len(server.calls_for("make a file")) == 2
    [replayed] = _entries(again)
    assert replayed["conversations"] == e["conversations"] and replayed["reward"] == 1.0


DOCKER = ("sandbox=docker", "sandbox.image=local/bookworm:ci", "sandbox.docker.pool_size=0")


@pytest.mark.parametrize(
    "sandbox", [pytest.param((), id="local"), pytest.param(DOCKER, marks=pytest.mark.docker, id="docker")]
)
def test_mini_swe_agent_from_pypi(make_cfg, server, tmp_path, run_dir, sandbox):
    """The real mini-swe-agent 2.4.6 (agent=mini_swe_agent): its bash tool calls run in the sandbox (the local one, a
    Debian container with its venv bound in), it submits."""
    consumer_python("mini_swe_agent")
    steps = [
        {"content": "Let me write it.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi > out.txt"}}]},
        {"content": "Done.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}}]},
    ]  # fmt: skip
    rows = [{"prompt": script(*steps, text="write hi to out.txt"), "verify": "grep -qx hi out.txt"}]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = make_cfg("agent=mini_swe_agent", f"agent.install={VENVS / 'mini_swe_agent'}", *sandbox,
                   "filters.require_reasoning=false", "+scorer@scorers.verify=verify", dataset=data)  # fmt: skip
    code, _ = run_inprocess(cfg, run_dir)
    assert code == 0, (run_dir / "failures.jsonl").read_text()
    [e] = _entries(run_dir)
    turns = e["conversations"]
    assert "helpful assistant that can interact with a computer" in turns[0]["value"]  # mini's own system prompt
    assert turns[1]["from"] == "human" and "write hi to out.txt" in turns[1]["value"]
    assert [t["from"] for t in turns[2:]] == ["gpt", "tool", "gpt"]
    assert "echo hi > out.txt" in turns[2]["value"] and "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in turns[4]["value"]
    assert e["tool_stats"]["bash"] == {"count": 1, "success": 1, "failure": 0}  # the submit call has no result
    assert e["metadata"]["agent"] == "mini-swe-agent 2.4.6"
    assert e["completed"] and e["api_calls"] == 2 and e["reward"] == 1.0


@pytest.mark.parametrize(
    "sandbox", [pytest.param((), id="local"), pytest.param(DOCKER, marks=pytest.mark.docker, id="docker")]
)
def test_hermes_agent_cli_from_pypi(make_cfg, server, tmp_path, run_dir, sandbox):
    """The original Hermes agent's CLI (hermes-agent 0.19.0, agent=hermes_agent): `hermes -z` with its terminal tool,
    in the local sandbox and in a Debian container with its venv bound in."""
    consumer_python("hermes_agent")
    steps = [
        {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo hi > out.txt"}}], "reasoning": "Write it."},
        {"content": "Wrote out.txt.", "reasoning": "Done."},
    ]
    rows = [{"prompt": script(*steps, text="write hi to out.txt"), "verify": "grep -qx hi out.txt"}]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = make_cfg("agent=hermes_agent", f"agent.install={VENVS / 'hermes_agent'}", *sandbox,
                   "+scorer@scorers.verify=verify", dataset=data)  # fmt: skip
    code, _ = run_inprocess(cfg, run_dir)
    assert code == 0, (run_dir / "failures.jsonl").read_text()
    [e] = _entries(run_dir)
    turns = e["conversations"]
    assert '"name": "terminal"' in turns[0]["value"]  # the tools hermes-agent offered
    assert [t["from"] for t in turns[1:]] == ["human", "gpt", "tool", "gpt"]
    assert turns[-1]["value"].endswith("Wrote out.txt.")
    assert e["tool_stats"]["terminal"] == {"count": 1, "success": 1, "failure": 0}
    assert e["metadata"]["agent"] == "hermes-agent 0.19.0" and e["completed"] and e["reward"] == 1.0


def test_a_program_that_ignores_the_proxy_reaches_nothing(make_cfg, server, tmp_path, run_dir):
    """The sandbox's only route out is the proxy: the model server itself (on this host's loopback) and a public
    address are unreachable from it, while the same program's calls through the proxy are answered (here from
    worker processes: executor.processes=2)."""
    rows = [
        {"prompt": script({"content": "ok"}, text=f"direct {i}"), "url": url, "verify": "grep -q DIRECT-BLOCKED direct.txt"}
        for i, url in enumerate([server.url + "/models", "http://1.1.1.1/"])
    ]  # fmt: skip
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    command = "agent.command='tiny-agent --direct {{ row.url | quote }} {{ prompt | quote }}'"
    cfg = make_cfg(*TINY, command, "executor.processes=2", "+scorer@scorers.verify=verify", dataset=data)
    code, _ = run_inprocess(cfg, run_dir)
    assert code == 0, (run_dir / "failures.jsonl").read_text()
    entries = sorted(_entries(run_dir), key=lambda e: e["prompt_index"])
    assert [e["reward"] for e in entries] == [1.0, 1.0], [e["scores"] for e in entries]
    assert all(len(server.calls_for(f"direct {i}")) == 1 for i in range(2))  # the proxied calls did


@pytest.mark.parametrize(
    "sandbox", [pytest.param((), id="local"), pytest.param(DOCKER, marks=pytest.mark.docker, id="docker")]
)
def test_kill_9_mid_run_leaves_no_agent_process_and_resumes_exactly_once(server, tmp_path, sandbox):
    """SIGKILL of the runner while the programs wait on a held model call: every process of it (the sandboxed
    programs and their bridges too) goes, and every container of it (its watchdog removes them); the rerun
    finishes each prompt exactly once."""
    steps = [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]}, {"content": "All done."}]
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": script(*steps, text=f"task {i}")} for i in range(3)])
    run_dir = tmp_path / "run"
    args = crash.cli_args(server, tmp_path, ds, run_dir, *TINY, *sandbox)
    landed, _ = crash.kill_mid_run(args, tmp_path / "log", server, random.Random(0), kills=1, calls=(0, 3))
    assert landed == 1
    crash.assert_each_prompt_once(run_dir, 3)
    assert {e["metadata"]["agent"] for e in _entries(run_dir)} == {"tiny-agent"}
    if sandbox:
        import docker

        label = f"{docker_orphans.RUN_DIR}={run_dir.resolve()}"
        client = docker.from_env(timeout=60)
        try:  # (the rerun reaps what the killed life left, else its watchdog does: none is left either way)
            assert client.api.containers(all=True, filters={"label": label}) == []
        finally:
            client.close()


@pytest.mark.docker
def test_tiny_agent_in_a_docker_container(make_cfg, server, tmp_path, run_dir):
    """sandbox=docker: the program is bound into the prompt's container (network none) and reaches the model through
    its socket in the run's proxy dir; the model server itself stays unreachable from the container."""
    steps = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi > out.txt; cat out.txt"}}]},
        {"content": "All done."},
    ]
    rows = [{"prompt": script(*steps, text="in docker"), "url": server.url + "/models",
             "verify": "grep -qx hi out.txt && grep -q DIRECT-BLOCKED direct.txt"}]  # fmt: skip
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    command = "agent.command='tiny-agent --direct {{ row.url | quote }} {{ prompt | quote }}'"
    cfg = make_cfg(*TINY, command, *DOCKER, "+scorer@scorers.verify=verify", dataset=data)
    code, _ = run_inprocess(cfg, run_dir)
    assert code == 0, (run_dir / "failures.jsonl").read_text()
    [e] = _entries(run_dir)
    assert [t["from"] for t in e["conversations"]] == ["system", "human", "gpt", "tool", "gpt"]
    assert e["tool_stats"] == {"bash": {"count": 1, "success": 1, "failure": 0}}
    assert e["completed"] and e["reward"] == 1.0, e["scores"]


def test_max_turns_stops_the_program_and_a_failed_model_call_fails_the_prompt(make_cfg, server, tmp_path, run_dir):
    """max_turns=1: the proxy refuses the program's second call; the entry keeps the first (stop_reason max_turns).
    A model call that fails after the run's retries: the program gets a 502 and the prompt fails with that error."""
    more = [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo 1"}}]}, {"content": "never asked"}]
    rows = [
        {"prompt": script(*more, text="too long")},
        {"prompt": script({"content": "x", "fail": [{"status": 400, "message": "bad request"}]}, text="failing")},
    ]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    code, _ = run_inprocess(make_cfg(*TINY, "max_turns=1", dataset=data), run_dir)
    assert code == 1
    [e] = _entries(run_dir)
    assert e["stop_reason"] == "max_turns" and not e["completed"] and e["api_calls"] == 1
    assert [t["from"] for t in e["conversations"]] == ["system", "human", "gpt"]  # the call no result followed
    assert len(server.calls_for("too long")) == 1  # the refused call never reached the model
    [failure] = read_jsonl(run_dir / "failures.jsonl")
    assert failure["error_type"] == "ModelCallError" and "bad request" in failure["error"]


def test_a_program_over_the_prompts_time_limit_is_kept_told_its_budget_and_verified(
    make_cfg, server, tmp_path, run_dir
):
    """limits.timeout_s: the program is stopped in its second call (a reply that never comes); the conversation of
    its first call is kept (stop_reason timeout) and verified in its sandbox. limits.tell_agent: each call the proxy
    forwards ends with the budget note, which the trajectory does not hold."""
    write = {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi > out.txt"}}]}
    rows = [
        {
            "prompt": script(write, {"fail": [{"status": 500, "hang": 3600}]}, text="hangs"),
            "verify": "grep -qx hi out.txt",
        }
    ]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    limits = ["limits.timeout_s=10", "limits.tell_agent=true", "+scorer@scorers.verify=verify"]
    code, stats = run_inprocess(make_cfg(*TINY, *limits, dataset=data), run_dir)
    assert code == 0, (run_dir / "failures.jsonl").read_text()
    [e] = _entries(run_dir)
    assert e["stop_reason"] == "timeout" and e["partial"] and e["reward"] == 1.0
    assert [t["from"] for t in e["conversations"]] == ["system", "human", "gpt"] and "[budget]" not in json.dumps(e)
    notes = [r.body["messages"][-1]["content"] for r in server.calls_for("hangs")]
    assert len(notes) == 2 and all(n.startswith("[budget] Left for this task: ") for n in notes)
    assert stats["answered_at_limit"]["by_limit"] == {"timeout": 1}


def test_a_pip_spec_is_installed_once_into_a_venv_of_the_cache(tmp_path, monkeypatch):
    """agent.install=pip:<spec>: pip (offline here: a local wheel) installs it into a venv under the cache dir,
    once per spec; its bin/ and version come from that venv."""
    from hermes_runner.agent.install import cache_root, resolve

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    wheel = tmp_path / "tiny_prog-1.2.3-py3-none-any.whl"  # written by hand: no build backend needed
    info = "tiny_prog-1.2.3.dist-info"
    files = {
        "tiny_prog/__init__.py": "def main():\n    print('tiny')\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: tiny-prog\nVersion: 1.2.3\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": "[console_scripts]\ntiny-prog = tiny_prog:main\n",
    }
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        zf.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in [*files, f"{info}/RECORD"]))
    spec = f"pip:--no-deps --no-index {wheel}"
    got = resolve(spec, "tiny-prog")
    [venv] = cache_root().iterdir()
    assert got.version == "1.2.3" and got.bin_dir == str(venv / "bin") and (venv / "bin" / "tiny-prog").exists()
    (venv / "bin" / "tiny-prog").unlink()
    assert resolve(spec, "tiny-prog").version == "1.2.3"  # installed once: the second resolve finds it as it was
    assert not (venv / "bin" / "tiny-prog").exists()
