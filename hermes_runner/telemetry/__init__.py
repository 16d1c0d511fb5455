"""OpenTelemetry spans of the sessions, after the GenAI semantic conventions (docs/telemetry.md).

One trace per prompt's session: invoke_agent -> chat (model calls) and execute_tool (tool calls) -> sandbox
commands; the scorers' spans under the session. The parts take a `Trace`: this module's `Trace` does nothing
(telemetry off: no OpenTelemetry module is imported), `open_trace` gives the real one (`otel`) when the
`telemetry` section names a destination. `genai` builds the attributes from the run's own records.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_runner.config import TelemetryConfig
from hermes_runner.errors import ConfigError

if TYPE_CHECKING:
    from hermes_runner.model.base import ChatModel
    from hermes_runner.sandbox.base import Sandbox

Attrs = Mapping[str, str | bool | int | float | list[str]]
EXTRA = "pip install 'hermes-runner[telemetry]'"


class Span:
    """A span being recorded; this one records nothing."""

    def set(self, attrs: Attrs) -> None:
        """Add attributes."""

    def fail(self, error_type: str, message: str = "") -> None:
        """Mark it failed: `error.type` and an error status."""


class Trace:
    """Telemetry off: every span is this no-op, and the model and sandboxes are used as they are."""

    capture_content = False

    @contextmanager
    def span(self, name: str, attrs: Attrs, client: bool = False) -> Iterator[Span]:
        """A span named `name`, the current one's child (in this task), current while the block runs."""
        yield _NO_SPAN

    def content(self, key: str, value: str) -> dict:
        """{key: value} (clipped) when the spans carry the conversation (capture_content), else {}."""
        return {}

    def model(self, model: ChatModel, attrs: Attrs) -> ChatModel:
        """`model`, each call of it a `chat` span with the request's `attrs`."""
        return model

    def sandbox(self, sandbox: Sandbox) -> Sandbox:
        """`sandbox`, each command (and file read or write) in it a span."""
        return sandbox

    def shutdown(self) -> None:
        """Export what is still buffered and close the exporters."""


_NO_SPAN = Span()


def check_telemetry(cfg: TelemetryConfig) -> None:
    """Before the run starts: telemetry on needs the OpenTelemetry SDK and OTLP exporter (a ConfigError naming the
    extra when missing), and the file's directory."""
    if not cfg.enabled:
        return
    if cfg.otlp_file and not Path(cfg.otlp_file).expanduser().absolute().parent.is_dir():
        raise ConfigError(f"telemetry.otlp_file={cfg.otlp_file}: its directory does not exist")
    for module in ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            raise ConfigError(f"telemetry.otlp_file / otlp_endpoint need {module.split('.trace')[0]}: {EXTRA}")


def open_trace(cfg: TelemetryConfig, resource: Attrs, redact: Callable[[str], str] = str) -> Trace:
    """The run's spans as `cfg` asks (this process's own exporters), or the no-op `Trace` when it is off.
    `redact` takes the secrets' values out of every text put into a span (util.redact.Redactor.text)."""
    if not cfg.enabled:
        return Trace()
    from hermes_runner.telemetry.otel import OtelTrace  # only now: a run without telemetry imports no OpenTelemetry

    return OtelTrace(cfg, resource, redact)
