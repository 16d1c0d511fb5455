"""The sandbox interface every backend implements."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from hermes_runner.errors import ToolError

if TYPE_CHECKING:
    from hermes_runner.dataset import Prompt

# Environment variables a sandboxed command may see; nothing else from the host.
SAFE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ", "TERM")

# The file tools' reads and writes, run inside the sandbox as its user (symlinks resolve there, never in the
# runner). sh: $1 = path, $2 = byte limit; the content goes to stdout. Exit 21: a directory, 22: no such file.
READ_SCRIPT = """[ -d "$1" ] && exit 21
[ -e "$1" ] || exit 22
exec head -c "$2" -- "$1"
"""

# sh: $1 = path; the content comes on stdin; missing parent dirs are made. A failed write still reads all of
# stdin: an engine may lose the error when the process exits with its stdin unread (Podman does).
WRITE_SCRIPT = """w() {
  case "$1" in */*) d=${1%/*}; [ -n "$d" ] && [ ! -d "$d" ] && { mkdir -p -- "$d" || return 1; };; esac
  [ -d "$1" ] && return 21
  cat > "$1"
}
w "$1"; s=$?; [ "$s" = 0 ] || cat >/dev/null; exit "$s"
"""


def _reason(stderr: str) -> str:
    text = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    # "head: cannot open 'x' for reading: Permission denied" -> the reason after the last colon
    return text.rsplit(": ", 1)[-1] if text else "unknown error"


def check_read(path: str, code: int, stderr: str) -> None:
    """Raise the file tool's error for a READ_SCRIPT that exited with `code`."""
    if code == 21:
        raise ToolError(f"is a directory: {path}")
    if code == 22:
        raise ToolError(f"file not found: {path}")
    if code:
        raise ToolError(f"cannot read {path}: {_reason(stderr)}")


def check_write(path: str, code: int, stderr: str) -> None:
    """Raise the file tool's error for a WRITE_SCRIPT that exited with `code`."""
    if code == 21:
        raise ToolError(f"cannot write {path}: is a directory")
    if code:
        raise ToolError(f"cannot write {path}: {_reason(stderr)}")


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


def process_start(pid: int) -> str | None:
    """Start time of a process (clock ticks since boot), or None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as fp:
            stat = fp.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def runner_alive(pid: int, start: str) -> bool:
    """Whether the process `pid` that started at `start` (a reused pid is not it) still runs."""
    if not os.path.exists("/proc/self/stat"):  # no procfs: trust the pid alone
        return pid_alive(pid)
    now = process_start(pid)
    return now is not None and (not start or now == start)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class OutputCap:
    """Keeps at most `limit` bytes of a stream of any length: 40% head, 60% tail."""

    def __init__(self, limit: int):
        self.head_max = max(1, int(limit * 0.4))
        self.tail_max = max(1, limit - self.head_max)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_max - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.tail_max * 2:
                del self.tail[: len(self.tail) - self.tail_max]

    def text(self) -> str:
        if self.total <= self.head_max + self.tail_max:
            return (bytes(self.head) + bytes(self.tail)).decode(errors="replace")
        dropped = self.total - len(self.head) - min(len(self.tail), self.tail_max)
        return (
            bytes(self.head).decode(errors="replace")
            + f"\n\n... [{dropped} bytes truncated] ...\n\n"
            + bytes(self.tail[-self.tail_max :]).decode(errors="replace")
        )
