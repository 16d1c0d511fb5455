from tests.helpers.run import read_jsonl, run_inprocess, write_jsonl


def test_small_run(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(5)])
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0
    rows = read_jsonl(run_dir / "trajectories.jsonl")
    assert [r["prompt_index"] for r in rows] == [0, 1, 2, 3, 4]
    assert stats["prompts"]["ok"] == 5
