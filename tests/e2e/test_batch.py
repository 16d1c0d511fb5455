"""Batch mode end to end: the real CLI against the scripted Batch API, through the real SDK and sandboxes.

200 prompts x 3 turns give the same trajectories as the direct mode, one batch per turn; a runner killed (-9) while
its batch is in flight resumes by following that batch, never sending it again, and every prompt ends once."""

from __future__ import annotations

import signal

from hermes_runner.rundir.layout import BATCH_JOURNAL
from hermes_runner.testing.scripted_server import ScriptedServer

from tests.helpers.crash import assert_each_prompt_once, cli_args, start
from tests.helpers.run import compose_cfg, read_jsonl, run_inprocess, script, write_jsonl
from tests.helpers.wait import exited, wait_for

BATCH = ["model.batch.enabled=true", "model.batch.poll_s=0.01", "model.batch.linger_s=0.05"]


def two_tools_then_answer(n: int) -> list[dict]:
    """n prompts, each scripted to call `terminal` twice and then answer (3 model calls)."""

    def call(i: int, k: int) -> dict:
        return {"name": "terminal", "arguments": {"command": f"echo p{i}-{k}"}, "id": f"c{i}_{k}"}

    return [
        {"prompt": script({"tool_calls": [call(i, 0)], "reasoning": "first"},
                          {"tool_calls": [call(i, 1)], "reasoning": "second"},
                          {"content": f"answer {i}", "reasoning": "done"}, text=f"task {i}")}
        for i in range(n)
    ]  # fmt: skip


def test_200_prompts_of_3_turns_give_the_direct_modes_trajectories_in_3_batches(server, tmp_path, make_cfg):
    ds = write_jsonl(tmp_path / "d.jsonl", two_tools_then_answer(200))
    common = ["distribution=terminal_only", "num_workers=200"]
    assert run_inprocess(make_cfg(*common, dataset=ds), tmp_path / "direct")[0] == 0
    direct_calls = len(server.requests)
    assert run_inprocess(make_cfg(*common, *BATCH, dataset=ds), tmp_path / "batch")[0] == 0
    direct, batch = (read_jsonl(tmp_path / d / "trajectories.jsonl") for d in ("direct", "batch"))
    assert len(batch) == 200 and [r["conversations"] for r in batch] == [r["conversations"] for r in direct]
    assert all(r["api_calls"] == 3 and r["completed"] for r in batch)
    # every session waits on the model at once: one batch per turn, each request answered once
    assert [len(b["custom_ids"]) for b in server.batch_api.created] == [200, 200, 200]
    assert len(server.requests) - direct_calls == 600


def test_a_kill_while_a_batch_is_in_flight_resumes_without_sending_it_again(server: ScriptedServer, tmp_path):
    n = 20
    ds = write_jsonl(tmp_path / "d.jsonl", two_tools_then_answer(n))
    run_dir = tmp_path / "run"
    args = cli_args(server, tmp_path, ds, run_dir, "distribution=terminal_only", f"num_workers={n}", *BATCH)
    compose_cfg([a for a in args if not a.startswith("hydra.")])  # (the overrides compose)
    log = tmp_path / "runner.log"
    server.batch_api.hold()
    proc = start(args, log)
    try:
        journal = run_dir / BATCH_JOURNAL
        wait_for(lambda: journal.exists() and b'"t": "batch"' in journal.read_bytes(), 120,
                 "the runner's first batch sent and recorded", gone=exited(proc))  # fmt: skip
        assert server.batch_api.in_flight()  # held: the runner waits on it
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    held = server.batch_api.created[0]["custom_ids"]
    assert len(server.batch_api.created) == 1 and len(held) == n
    server.batch_api.release()
    assert start(args, log).wait(120) == 0, log.read_text()[-3000:]
    created = server.batch_api.created
    assert sum(key in b["custom_ids"] for b in created for key in held) == n  # each held request sent once
    assert len(created) == 3 and len(server.requests) == 3 * n  # nothing answered (paid) twice
    assert_each_prompt_once(run_dir, n)
