"""The real `Trace`: this process's TracerProvider (the official OpenTelemetry SDK) with a batch span processor per
destination: the OTLP JSON lines file (`otlp_json`) and/or an OTLP/HTTP endpoint. Imported only with telemetry on.

Each process of a run (the runner, every `executor.processes` worker, every Ray actor) has its own provider and
exporters; the spans of one session are all made in the process that runs it, so each trace is whole in one."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

from hermes_runner import __version__
from hermes_runner.config import TelemetryConfig
from hermes_runner.model.base import ChatModel, Completion
from hermes_runner.sandbox.base import ExecResult, Sandbox
from hermes_runner.telemetry import Attrs, Span, Trace, genai
from hermes_runner.telemetry.otlp_json import OtlpJsonLinesExporter


class OtelSpan(Span):
    """An SDK span whose every text goes through the run's redaction (the secrets' values never reach a span)."""

    def __init__(self, span, redact: Callable[[str], str]):
        self.span, self.redact = span, redact

    def set(self, attrs: Attrs) -> None:
        self.span.set_attributes({k: self.redact(v) if isinstance(v, str) else v for k, v in attrs.items()})

    def fail(self, error_type: str, message: str = "") -> None:
        self.span.set_attribute(genai.ERROR_TYPE, error_type)
        self.span.set_status(Status(StatusCode.ERROR, self.redact(message[:500] or error_type)))


class OtelTrace(Trace):
    def __init__(self, cfg: TelemetryConfig, resource: Attrs, redact: Callable[[str], str]):
        self.capture_content, self.redact = cfg.capture_content, redact
        attrs = {"service.name": cfg.service_name, "service.version": __version__, "process.pid": os.getpid()}
        self.provider = TracerProvider(resource=Resource.create({**attrs, **resource}))
        if cfg.otlp_file:
            self.provider.add_span_processor(BatchSpanProcessor(OtlpJsonLinesExporter(cfg.otlp_file)))
        if cfg.otlp_endpoint:
            self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=cfg.otlp_endpoint)))
        self.tracer = self.provider.get_tracer("hermes_runner", __version__)

    @contextmanager
    def span(self, name: str, attrs: Attrs, client: bool = False) -> Iterator[Span]:
        kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
        with self.tracer.start_as_current_span(name, kind=kind) as raw:
            span = OtelSpan(raw, self.redact)
            span.set(attrs)
            try:
                yield span
            except BaseException as exc:  # the error's type on the span (the SDK records the exception itself)
                span.fail(type(exc).__name__, str(exc))
                raise

    def content(self, key: str, value: str) -> dict:
        return {key: genai.text(value)} if self.capture_content else {}

    def model(self, model: ChatModel, attrs: Attrs) -> ChatModel:
        return TracedModel(model, self, attrs)

    def sandbox(self, sandbox: Sandbox) -> Sandbox:
        return TracedSandbox(sandbox, self)

    def shutdown(self) -> None:
        self.provider.shutdown()  # flushes every processor, then closes the exporters


class TracedModel:
    """A chat model whose every call is a `chat` span (retries inside it; a cached reply: hermes.cached)."""

    def __init__(self, inner: ChatModel, trace: OtelTrace, attrs: Attrs):
        self.inner, self.trace, self.attrs = inner, trace, attrs
        self.name = f"chat {attrs.get(genai.REQUEST_MODEL, '')}".strip()

    async def complete(self, messages: list[dict], tools: list[dict]) -> Completion:
        with self.trace.span(self.name, self.attrs, client=True) as span:
            if self.trace.capture_content:
                system, sent = genai.messages(messages)
                span.set({genai.SYSTEM_INSTRUCTIONS: system, genai.INPUT_MESSAGES: sent})
            reply = await self.inner.complete(messages, tools)
            span.set(genai.chat_response(reply))
            if self.trace.capture_content:
                span.set({genai.OUTPUT_MESSAGES: genai.json_text([genai.message(reply.message)])})
            return reply

    async def aclose(self) -> None:
        await self.inner.aclose()


class TracedSandbox:
    """A sandbox whose commands, reads and writes are spans (under the tool call or scorer that runs them)."""

    def __init__(self, inner: Sandbox, trace: OtelTrace):
        self.inner, self.trace = inner, trace

    @property
    def cwd(self) -> str:
        return self.inner.cwd

    async def run(self, command: str, timeout: float, workdir: str | None = None) -> ExecResult:
        attrs = {"hermes.sandbox.op": "run", **self.trace.content(genai.COMMAND_LINE, command)}
        with self.trace.span("sandbox run", attrs) as span:
            result = await self.inner.run(command, timeout, workdir)
            span.set({genai.EXIT_CODE: result.exit_code, "hermes.sandbox.timed_out": result.timed_out})
            if result.timed_out:
                span.fail("timeout")
            return result

    async def read_file(self, path: str) -> bytes:
        with self.trace.span(
            "sandbox read_file", {"hermes.sandbox.op": "read_file", **self.trace.content("file.path", path)}
        ):
            return await self.inner.read_file(path)

    async def write_file(self, path: str, data: bytes) -> None:
        attrs = {
            "hermes.sandbox.op": "write_file",
            "hermes.sandbox.bytes": len(data),
            **self.trace.content("file.path", path),
        }
        with self.trace.span("sandbox write_file", attrs):
            await self.inner.write_file(path, data)

    async def close(self) -> None:
        await self.inner.close()

    def __getattr__(self, name: str):  # what a backend's sandbox has beyond the Protocol (e.g. its container)
        return getattr(self.inner, name)
