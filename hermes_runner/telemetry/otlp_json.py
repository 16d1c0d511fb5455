"""The OTLP JSON lines file: each export is one ExportTraceServiceRequest, as one line of OTLP/JSON (what the
OpenTelemetry collector's file exporter writes and its otlpjsonfile receiver reads).

OTLP/JSON is protobuf's JSON mapping with two differences: trace and span ids are hex strings (not base64),
enums are integers. Many processes append to one file: each opens it with O_APPEND and writes every line with
one write(), so lines never interleave (on a local filesystem; not on NFS)."""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from hermes_runner.util import fastjson

IDS = ("traceId", "spanId", "parentSpanId")


def request_line(spans: Sequence[ReadableSpan]) -> bytes:
    """One ExportTraceServiceRequest of `spans` as a line of OTLP/JSON."""
    doc = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                _hex_ids(span)
                for link in span.get("links", []):
                    _hex_ids(link)
    return fastjson.dumps(doc) + b"\n"


def _hex_ids(d: dict) -> None:
    for key in IDS:
        if d.get(key):
            d[key] = base64.b64decode(d[key]).hex()


class OtlpJsonLinesExporter(SpanExporter):
    """Appends each batch of spans to `path` as one line (the batch span processor's thread calls it)."""

    def __init__(self, path: str):
        self.fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.fd is None:
            return SpanExportResult.FAILURE
        line = memoryview(request_line(spans))
        while line:  # one write() for a whole line; a short write (disk full) ends it as best it can
            line = line[os.write(self.fd, line) :]
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True
