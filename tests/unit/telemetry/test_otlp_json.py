"""The OTLP JSON lines file: real SDK spans, written by several processes at once, read back whole with the
official protobuf messages (ids hex, as OTLP/JSON has them)."""

from __future__ import annotations

import multiprocessing
import re
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from hermes_runner.telemetry.otlp_json import OtlpJsonLinesExporter

from tests.helpers.otlp import read_file

WRITERS, TRACES, CHILDREN = 3, 40, 5


def write_spans(path: str, writer: int) -> None:
    provider = TracerProvider(resource=Resource.create({"writer": writer}))
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonLinesExporter(path)))  # a line per span: many writes
    tracer = provider.get_tracer("t")
    for i in range(TRACES):
        with tracer.start_as_current_span(f"root {writer}/{i}", attributes={"pad": "x" * 3000}):
            for j in range(CHILDREN):
                with tracer.start_as_current_span(f"child {j}", attributes={"n": j}):
                    pass
    provider.shutdown()


def test_concurrent_writers_append_whole_lines(tmp_path: Path):
    path = tmp_path / "spans.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=write_spans, args=(str(path), w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    lines = path.read_text().splitlines()
    assert len(lines) == WRITERS * TRACES * (CHILDREN + 1)
    assert re.search(r'"traceId":"[0-9a-f]{32}","spanId":"[0-9a-f]{16}"', lines[0])  # OTLP/JSON ids: hex
    spans = read_file(path)  # every line parses into an ExportTraceServiceRequest
    roots = [s for s in spans if not s.parent_id]
    assert len(roots) == WRITERS * TRACES
    assert all(len(r.children) == CHILDREN and {c.trace_id for c in r.children} == {r.trace_id} for r in roots)
    assert {r.resource["writer"] for r in roots} == set(range(WRITERS))
