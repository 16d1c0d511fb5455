"""A streamed run (model.stream=true) writes exactly the trajectories of a non-streamed one (the client's
streaming itself is tested in tests/unit/model/test_stream.py)."""

from __future__ import annotations

from tests.helpers.run import read_jsonl, run_inprocess, script, write_jsonl

TERM = {"id": "call_t", "name": "terminal", "arguments": {"command": "echo hi"}}
WRITE = {"id": "call_w", "name": "write_file", "arguments": '{"path": "notes/ü.txt", "content": "line 1\\nline 2"}'}
FINAL = {"content": "final answer", "reasoning": "wrap up"}


def test_a_streamed_run_writes_the_same_trajectories(make_cfg, tmp_path, server):
    rows = [
        {"prompt": script({"tool_calls": [TERM], "reasoning": "look"}, FINAL, text="one tool")},
        {"prompt": script({"tool_calls": [TERM, WRITE], "reasoning": "both", "reasoning_field": "reasoning_details"},
                          {"content": "done", "reasoning": "ok", "reasoning_field": "think"}, text="two tools")},
    ]  # fmt: skip
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    outs = {}
    for stream in (False, True):
        run_dir = tmp_path / f"run-{stream}"
        code, _ = run_inprocess(make_cfg(f"model.stream={str(stream).lower()}", dataset=ds), run_dir)
        assert code == 0
        outs[stream] = [
            {k: v for k, v in e.items() if k != "metadata"} for e in read_jsonl(run_dir / "trajectories.jsonl")
        ]
    assert outs[True] == outs[False] and len(outs[True]) == 2
    assert sum(1 for r in server.requests if r.body.get("stream")) == 4
