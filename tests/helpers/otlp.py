"""Reading spans back with the official OTLP protobuf messages (opentelemetry-proto): the OTLP JSON lines file
(hex ids back to protobuf's base64, then json_format) and the bodies an OTLP/HTTP receiver gets."""

from __future__ import annotations

import base64
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

IDS = ("traceId", "spanId", "parentSpanId")


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root
    kind: int
    attrs: dict
    status: int  # 0 unset, 1 ok, 2 error
    resource: dict = field(default_factory=dict)
    children: list[Span] = field(default_factory=list)


def value(v: AnyValue) -> object:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


def _base64_ids(d: dict) -> None:
    for key in IDS:
        if d.get(key):
            d[key] = base64.b64encode(bytes.fromhex(d[key])).decode()


def parse_line(line: str) -> ExportTraceServiceRequest:
    """One line of the file as the OTLP/JSON spec reads it (hex ids), into the protobuf message."""
    doc = json.loads(line)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                _base64_ids(span)
                for link in span.get("links", []):
                    _base64_ids(link)
    return ParseDict(doc, ExportTraceServiceRequest())


def spans_of(requests: list[ExportTraceServiceRequest]) -> list[Span]:
    """Every span of the requests, with its resource's attributes, linked to its children."""
    out = []
    for req in requests:
        for rs in req.resource_spans:
            resource = {a.key: value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    attrs = {a.key: value(a.value) for a in s.attributes}
                    out.append(Span(s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.kind,
                                    attrs, s.status.code, resource))  # fmt: skip
    by_id = {s.span_id: s for s in out}
    for s in out:
        if s.parent_id:
            by_id[s.parent_id].children.append(s)
    return out


def read_file(path: Path) -> list[Span]:
    return spans_of([parse_line(line) for line in path.read_text().splitlines() if line.strip()])


def descendants(span: Span) -> list[Span]:
    return [d for c in span.children for d in (c, *descendants(c))]


def op(span: Span) -> str:
    return str(span.attrs.get("gen_ai.operation.name", ""))


def tree(spans: list[Span]) -> dict[str, Span]:
    """The session (root) spans by conversation id (the prompt's key); every span is in its root's trace."""
    roots = [s for s in spans if not s.parent_id]
    assert {op(r) for r in roots} == {"invoke_agent"}
    by_trace = Counter(s.trace_id for s in spans)
    assert sum(by_trace[r.trace_id] for r in roots) == len(spans), "a span outside its session's trace"
    assert len({r.trace_id for r in roots}) == len(roots), "one trace per session"
    return {r.attrs["gen_ai.conversation.id"]: r for r in roots}


def tool_calls_of(entry: dict) -> int:
    """The trajectory entry's tool calls: the <tool_call> blocks of its gpt turns."""
    return sum(t["value"].count("<tool_call>") for t in entry["conversations"] if t["from"] == "gpt")


def model_turns_of(entry: dict) -> int:
    """The trajectory entry's model turns: its gpt turns (the steps of its ATIF export)."""
    return sum(1 for t in entry["conversations"] if t["from"] == "gpt")
