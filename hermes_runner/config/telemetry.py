"""The telemetry section: OpenTelemetry GenAI spans of every session, to a file and/or a collector (docs/telemetry.md)."""

from dataclasses import dataclass


@dataclass
class TelemetryConfig:
    """Off unless a destination is set; needs the `telemetry` extra (pip install 'hermes-runner[telemetry]')."""

    # OTLP JSON lines file: one ExportTraceServiceRequest per line (as the OpenTelemetry collector's file exporter
    # writes), appended; every process of the run appends whole lines to it (relative paths: from the working dir)
    otlp_file: str | None = None
    # OTLP/HTTP traces URL of a collector or backend, e.g. http://localhost:4318/v1/traces (Jaeger, Phoenix, ...);
    # headers (auth) come from OTEL_EXPORTER_OTLP_TRACES_HEADERS / OTEL_EXPORTER_OTLP_HEADERS, never from the config
    otlp_endpoint: str | None = None
    # Put the conversation into the spans: prompts and replies on model calls, arguments and results on tool
    # calls, commands on sandbox spans. Off: spans carry names, ids, counts, usage and cost only.
    capture_content: bool = False
    service_name: str = "hermes-runner"  # the resource's service.name

    @property
    def enabled(self) -> bool:
        return bool(self.otlp_file or self.otlp_endpoint)

    def problems(self, where: str) -> list[str]:
        key = f"{where}.otlp_endpoint".lstrip(".")
        url = self.otlp_endpoint
        if url is not None and not url.startswith(("http://", "https://")):
            return [f"{key} must be an http:// or https:// URL (OTLP/HTTP), not {url!r}"]
        return []
