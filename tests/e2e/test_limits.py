"""Prompts at their limits through the real CLI (issue 35): a prompt over limits.timeout_s is kept and verified in its
sandbox, counted in pass@k as limits.at_limit says; limits.tell_agent's note reaches the endpoint and never the data."""

from __future__ import annotations

import json

from tests.helpers.run import read_jsonl, run_cli, script, write_jsonl

WRITE = {
    "reasoning": "write it",
    "tool_calls": [{"name": "terminal", "arguments": {"command": "echo 42 > answer.txt"}}],
}
HANG = {"fail": [{"status": 500, "hang": 3600}]}  # a reply that never comes: only the limit ends this prompt


def test_a_prompt_over_its_time_limit_is_still_verified_and_counts_as_at_limit_says(server, tmp_path):
    rows = [
        {"prompt": script(WRITE, HANG, text="write, then hang"), "verify": "grep -qx 42 answer.txt"},
        {"prompt": script(WRITE, {"content": "Written.", "reasoning": "done"}, text="write"), "verify": "grep -qx 42 answer.txt"},
    ]  # fmt: skip
    ds, run = write_jsonl(tmp_path / "d.jsonl", rows), tmp_path / "run"
    done = run_cli(
        "model=local_server", f"model.base_url={server.url}", f"dataset_file={ds}", "run_name=lim", "progress=false",
        f"hydra.run.dir={run}", f"sandbox.local.root={tmp_path / 'sb'}", "distribution=terminal_only", "cache=off",
        "num_workers=2", "+scorer@scorers.v=verify", "limits.timeout_s=8", "limits.tell_agent=true",
        "limits.at_limit=fail",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    hung, written = read_jsonl(run / "trajectories.jsonl")
    assert (hung["stop_reason"], hung["completed"], hung["partial"]) == ("timeout", False, True)
    assert hung["reward"] == 1.0 and hung["scores"][0]["passed"]  # verify found what the agent left before the limit
    assert [t["from"] for t in hung["conversations"]] == ["system", "human", "gpt"]  # ends on the call it made
    assert written["stop_reason"] == "final_answer" and written["reward"] == 1.0
    stats = json.loads((run / "statistics.json").read_text())
    assert stats["answered_at_limit"] == {"prompts": 1, "by_limit": {"timeout": 1}, "counted_as": {"fail": 1}}
    assert stats["scores"]["overall"]["v"]["pass_at_1"] == 0.5  # the timed-out prompt counted as failed
    assert stats["prompts"]["failed"] == 0 and stats["prompts"]["partial"] == 1
    assert "answered at a limit: 1 (timeout 1); in pass@k counted as fail 1" in done.stdout
    sent = [r.body["messages"][-1] for r in server.requests if r.body.get("tools")]
    assert len(sent) == 4 and all(m["role"] == "system" and m["content"].startswith("[budget]") for m in sent)
    assert "seconds" in sent[0]["content"]
    assert "[budget]" not in (run / "trajectories.jsonl").read_text()  # sent, never saved
