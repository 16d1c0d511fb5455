"""The sandbox interface every backend implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from hermes_runner.dataset import Prompt

# Environment variables a sandboxed command may see; nothing else from the host.
SAFE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ", "TERM")


@dataclass(slots=True)
class ExecResult:
    exit_code: int
    output: str  # stdout and stderr interleaved
    timed_out: bool = False


class Sandbox(Protocol):
    """One prompt's isolated environment."""

    cwd: str

    async def run(self, command: str, timeout: float, workdir: str | None = None) -> ExecResult: ...

    async def read_file(self, path: str) -> bytes: ...

    async def write_file(self, path: str, data: bytes) -> None: ...

    async def close(self) -> None: ...


class SandboxBackend(Protocol):
    """Creates sandboxes for one run."""

    async def start(self, images: set[str]) -> dict[str, str]:
        """Prepare the backend; return {image: reason} for images that cannot be had."""
        ...

    async def create(self, prompt: Prompt) -> Sandbox: ...

    async def shutdown(self) -> None: ...


def truncate_middle(text: str, limit: int) -> str:
    """Keep 40% head and 60% tail of an over-long text, with a notice in between."""
    if len(text) <= limit:
        return text
    head = int(limit * 0.4)
    tail = limit - head
    dropped = len(text) - head - tail
    return f"{text[:head]}\n\n... [{dropped} characters truncated] ...\n\n{text[-tail:]}"
