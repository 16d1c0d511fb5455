"""A varied, real scripted run for the report and export tests: every outcome, several tools."""

from __future__ import annotations

import json
from pathlib import Path

from hermes_runner.testing.scripted_server import ScriptedServer

from tests.helpers.run import base_overrides, compose_cfg, run_inprocess, script, write_jsonl

MARKUP = "<script>window.__pwned = 1</script><b>not bold</b>"


def _call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def prompts() -> list[dict]:
    """One prompt per kind of outcome; the list is repeated with distinct texts for volume."""
    kinds = [
        # completed: one terminal call, reasoning in another field
        script(
            {"reasoning": "List the directory.", "tool_calls": [_call("terminal", command="echo hi; ls")]},
            {"reasoning": "Done.", "reasoning_field": "reasoning_content", "content": "It printed hi."},
            text="say hi",
        ),
        # completed: several tools, a failed tool call (empty command) and a non-zero exit code
        script(
            {
                "reasoning": "Write then read a file.",
                "tool_calls": [
                    _call("write_file", path="notes.txt", content="alpha\nbeta\n"),
                    _call("terminal", command=""),
                ],
            },
            {"reasoning": "Read it back.", "tool_calls": [_call("read_file", path="notes.txt")]},
            {"reasoning": "Check exit codes.", "tool_calls": [_call("terminal", command="exit 3")]},
            {"reasoning": "All good.", "content": f"The file holds alpha and beta. {MARKUP}"},
            text="write notes",
        ),
        # discarded: no reasoning anywhere
        script({"content": "A plain answer with no thinking."}, text="answer plainly"),
        # discarded: a tool that does not exist
        script(
            {"reasoning": "Search the web.", "tool_calls": [_call("teleport", destination="moon")]},
            {"reasoning": "No web tool; answer anyway.", "content": "I cannot search."},
            text="search the web",
        ),
        # partial: output cut by length
        script(
            {"reasoning": "A long answer follows", "content": "Once upon a", "finish_reason": "length"},
            text="long story",
        ),
        # partial: repeated invalid calls
        script(
            *[{"reasoning": "Try again.", "tool_calls": [{"name": "terminal", "arguments": "{not json"}]}] * 3,
            text="broken arguments",
        ),
        # failed: the endpoint refuses the request for good
        script({"fail": [{"status": 400, "message": "context length exceeded"}]}, text="too long"),
        # completed after a search over files
        script(
            {"reasoning": "Create a file.", "tool_calls": [_call("write_file", path="a.py", content="print('x')\n")]},
            {"reasoning": "Find it.", "tool_calls": [_call("search_files", pattern="print", target="content")]},
            {"reasoning": "Found.", "content": "a.py prints x."},
            text="find print",
        ),
    ]
    rows = []
    for i in range(3):
        for k, prompt in enumerate(kinds):
            rows.append({"prompt": f"[{i}.{k}] {prompt}", "topic": f"kind{k}"})
    return rows


def make_run(server: ScriptedServer, base: Path, name: str = "run", *overrides: str) -> Path:
    """Run the varied dataset through the real runner; return the run dir."""
    base.mkdir(parents=True, exist_ok=True)
    ds = write_jsonl(base / f"{name}.jsonl", prompts())
    cfg = compose_cfg(
        base_overrides(server, base)
        + [f"run_name={name}", f"dataset_file={ds}", "batch_size=5", "sandbox.local.isolation=none", *overrides]
    )
    run_dir = base / name
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 1 and stats is not None, "the sample run has failing prompts by design"
    return run_dir


if __name__ == "__main__":  # a run dir to look at: python -m tests.helpers.sample_run /tmp/somewhere
    import sys

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "outputs/report-sample")
    srv = ScriptedServer().start()
    try:
        print(make_run(srv, out.resolve()))
    finally:
        srv.stop()
    print(json.dumps(json.loads((out / "run" / "statistics.json").read_text())["prompts"]))
