from tests.helpers.run import run_inprocess, write_jsonl


def test_tool_choice_is_sent_with_the_tools(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    code, _ = run_inprocess(make_cfg("model.tool_choice=required", dataset=ds), run_dir)
    assert code == 0
    bodies = [seen.body for seen in server.requests]
    assert bodies and all(b["tool_choice"] == "required" and b["tools"] for b in bodies)


def test_no_tool_choice_by_default(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    code, _ = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0
    assert server.requests and all("tool_choice" not in seen.body for seen in server.requests)


def test_tool_choice_turns_limits_it_to_the_first_calls(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    code, _ = run_inprocess(make_cfg("model.tool_choice=required", "model.tool_choice_turns=1", dataset=ds), run_dir)
    assert code == 0
    bodies = [seen.body for seen in server.requests]
    assert len(bodies) >= 2, "the default script makes a tool call, then answers"
    assert bodies[0]["tool_choice"] == "required"
    assert all("tool_choice" not in b and b["tools"] for b in bodies[1:])
