"""telemetry.otlp_file / otlp_endpoint on real runs: the real CLI with two worker processes writing one OTLP JSON
lines file, and a real OTLP/HTTP receiver on loopback; the spans read back with the official opentelemetry-proto
messages and checked against the run's own records (trajectories, usage.jsonl, statistics.json)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from hermes_runner.commands.export import main as export_main

from tests.helpers.otlp import Span, descendants, model_turns_of, op, read_file, spans_of, tool_calls_of, tree
from tests.helpers.run import read_jsonl, run_cli, run_inprocess, script, write_jsonl

pytestmark = pytest.mark.timeout(300)
SECRET = "sk-telemetry-secret-0451"


def call(command: str) -> dict:
    return {"name": "terminal", "arguments": {"command": command}}


def rows() -> list[dict]:
    """Four prompts: parallel tool calls (two, then three), one call, a direct answer; each verified."""
    final = {"content": "done", "reasoning": "all ran", "cost": 0.002}
    steps = [
        [{"tool_calls": [call("echo a"), call("echo b")], "reasoning": "both", "cost": 0.001}, final],
        [{"tool_calls": [call("echo c"), call("echo d"), call("echo e")], "reasoning": "three", "cost": 0.003}, final],
        [{"tool_calls": [call("echo f")], "reasoning": "one"}, final],
        [{"content": "at once", "reasoning": "I know it", "cost": 0.004}],
    ]
    return [{"prompt": script(*s, text=f"task {i}"), "verify": "test -d ."} for i, s in enumerate(steps)]


def check_session(root: Span, entry: dict, scorers: tuple[str, ...] = ("tests",)) -> None:
    """Under the session: its model calls, tool calls (each with its sandbox command), the scorers (verify's command
    under it), in the numbers the trajectory has; the session's usage and cost the entry's (a judge's calls too)."""
    kids = Counter(op(c) or c.name for c in root.children)
    scored = {f"evaluate {s}": 1 for s in scorers}
    assert kids == Counter({"chat": model_turns_of(entry), "execute_tool": tool_calls_of(entry), **scored})
    for tool in (c for c in root.children if op(c) == "execute_tool"):
        assert tool.attrs["gen_ai.tool.name"] == "terminal" and tool.attrs["gen_ai.tool.call.id"]
        (cmd,) = tool.children
        assert cmd.name == "sandbox run" and cmd.attrs["process.exit.code"] == 0
    (scorer,) = (c for c in root.children if c.name == "evaluate tests")
    assert scorer.attrs["gen_ai.evaluation.score.value"] == entry["reward"] == 1.0
    assert scorer.attrs["gen_ai.evaluation.score.label"] == "pass"
    assert [c.name for c in scorer.children] == ["sandbox run"]  # verify's command, in the prompt's sandbox
    usage = entry["usage"]
    assert root.attrs["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert root.attrs["gen_ai.usage.output_tokens"] == usage["completion_tokens"]
    assert root.attrs["hermes.usage.cost_usd"] == pytest.approx(usage["cost_usd"])
    chats = [c for c in descendants(root) if op(c) == "chat"]
    assert sum(c.attrs["gen_ai.usage.input_tokens"] for c in chats) == usage["prompt_tokens"]
    assert all(c.attrs["gen_ai.request.model"] and c.kind == 3 for c in chats)  # SPAN_KIND_CLIENT


def test_spans_file_of_a_cli_run_with_two_worker_processes(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", rows())
    out, run_dir = tmp_path / "spans" / "run.otlp.jsonl", tmp_path / "run"
    out.parent.mkdir()
    res = run_cli(
        "model=local_server", f"model.base_url={server.url}", "model.api_key_env=HERMES_TEST_KEY",
        f"dataset_file={ds}", "run_name=otel", "progress=false", "cache=off", "distribution=terminal_only",
        f"hydra.run.dir={run_dir}", f"sandbox.local.root={tmp_path / 'sb'}", "executor.processes=2", "num_workers=4",
        "+scorer@scorers.tests=verify", f"telemetry.otlp_file={out}",
        env={"HERMES_TEST_KEY": SECRET},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    entries = {e["prompt_index"]: e for e in read_jsonl(run_dir / "trajectories.jsonl")}
    assert len(entries) == 4
    spans = read_file(out)
    roots = tree(spans)
    assert len(roots) == 4
    assert len({r.resource["process.pid"] for r in roots.values()}) == 2, "both worker processes wrote to the file"
    for entry in entries.values():
        check_session(roots[entry["metadata"]["prompt_key"]], entry)
    # The round trip: the trajectories' model turns and tool calls are the spans'; usage.jsonl's calls too.
    ops = Counter(op(s) for s in spans)
    assert ops["chat"] == sum(model_turns_of(e) for e in entries.values()) == 7
    assert ops["execute_tool"] == sum(tool_calls_of(e) for e in entries.values()) == 6
    # ... and the ATIF export's: each session's agent steps are its chat spans, their tool calls its tools.
    assert export_main([str(run_dir), "--to", "atif"]) == 0
    for line in read_jsonl(run_dir / "export" / "atif" / "index.jsonl"):
        steps = json.loads((run_dir / "export" / "atif" / line["file"]).read_text())["steps"]
        agent = [st for st in steps if st["source"] == "agent"]
        kids = Counter(op(s) for s in descendants(roots[line["key"]]))
        assert (kids["chat"], kids["execute_tool"]) == (
            len(agent),
            sum(len(st.get("tool_calls") or []) for st in agent),
        )
    ends = [c for c in read_jsonl(run_dir / "usage.jsonl") if c["event"] == "end"]
    chats = [s for s in spans if op(s) == "chat"]
    assert len(ends) == len(chats)
    for key in ("prompt_tokens", "completion_tokens"):
        assert sum(c["usage"][key] for c in ends) == sum(
            s.attrs[f"gen_ai.usage.{'input' if key == 'prompt_tokens' else 'output'}_tokens"] for s in chats
        )
    stats = json.loads((run_dir / "statistics.json").read_text())
    assert sum(s.attrs["hermes.usage.cost_usd"] for s in chats) == pytest.approx(stats["usage"]["cost_usd"])
    assert stats["usage"]["cost_usd"] == pytest.approx(0.001 + 0.003 + 0.004 + 3 * 0.002)
    # No secret and, by default, no conversation content in the file.
    text = out.read_text()
    assert SECRET not in text and "echo a" not in text and "task 0" not in text
    assert not any("gen_ai.input.messages" in s.attrs for s in spans)


class Receiver:
    """A real OTLP/HTTP traces receiver on loopback: it parses each POSTed protobuf body, keeps its headers."""

    def __init__(self):
        self.requests: list[ExportTraceServiceRequest] = []
        self.headers: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                assert self.path == "/v1/traces" and self.headers["Content-Type"] == "application/x-protobuf"
                receiver.requests.append(ExportTraceServiceRequest.FromString(body))
                receiver.headers.append(dict(self.headers))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/traces"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def test_spans_to_an_otlp_http_endpoint_with_content(make_cfg, tmp_path: Path, run_dir, server, receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"authorization=Bearer {SECRET}")
    monkeypatch.setenv("HERMES_TEST_KEY", SECRET)
    row = rows()[0]
    row["prompt"] = row["prompt"].replace("task 0", f"task 0, with the key {SECRET} pasted in")
    ds = write_jsonl(tmp_path / "d.jsonl", [row])
    cfg = make_cfg("distribution=terminal_only", "model.api_key_env=HERMES_TEST_KEY", "+scorer@scorers.tests=verify", "+scorer@scorers.quality=judge",
                   f"telemetry.otlp_endpoint={receiver.url}", "telemetry.capture_content=true", dataset=ds)  # fmt: skip
    cfg.scorers["quality"].judge.rubric = "#judging\n{{ prompt }}\nAnswer: {{ answer }}"  # the scripted judge answers
    code, _ = run_inprocess(cfg, run_dir)
    assert code == 0
    (entry,) = read_jsonl(run_dir / "trajectories.jsonl")
    spans = spans_of(receiver.requests)  # all there when the run returns: its exporters are flushed at the end
    (root,) = tree(spans).values()
    check_session(root, entry, ("tests", "quality"))
    (judge,) = (c for c in root.children if c.name == "evaluate quality")
    (judge_call,) = judge.children  # the judge's model call, under its scorer
    assert op(judge_call) == "chat" and judge_call.attrs["gen_ai.usage.input_tokens"] > 0
    assert (
        judge.attrs["gen_ai.evaluation.score.value"] == 1.0 and judge.attrs["gen_ai.evaluation.explanation"] == "fine"
    )
    assert {h["authorization"] for h in receiver.headers} == {f"Bearer {SECRET}"}  # the SDK's env, on the wire only
    assert not any(SECRET in json.dumps(s.attrs) for s in spans)  # the key's value, even in captured content
    # capture_content: the conversation is on the spans, in the conventions' message shape.
    first = next(c for c in root.children if op(c) == "chat")
    (user,) = json.loads(first.attrs["gen_ai.input.messages"])
    assert user["role"] == "user" and user["parts"][0]["content"].startswith(
        "task 0, with the key ${oc.env:HERMES_TEST_KEY}"
    )
    assert "You are an autonomous agent" in first.attrs["gen_ai.system_instructions"]
    (out,) = json.loads(first.attrs["gen_ai.output.messages"])
    assert [p["name"] for p in out["parts"] if p["type"] == "tool_call"] == ["terminal", "terminal"]
    tools = [c for c in root.children if op(c) == "execute_tool"]
    assert [json.loads(t.attrs["gen_ai.tool.call.arguments"])["command"] for t in tools] == ["echo a", "echo b"]
    assert [t.children[0].attrs["process.command_line"] for t in tools] == ["echo a", "echo b"]
    assert json.loads(tools[0].attrs["gen_ai.tool.call.result"])["output"].strip() == "a"


def test_a_bad_endpoint_is_refused_before_the_run(tmp_path):
    run_dir = tmp_path / "run"
    res = run_cli("telemetry.otlp_endpoint=localhost:4318", f"hydra.run.dir={run_dir}")
    assert res.returncode == 2 and "telemetry.otlp_endpoint must be an http:// or https:// URL" in res.stderr
    assert not run_dir.exists()
