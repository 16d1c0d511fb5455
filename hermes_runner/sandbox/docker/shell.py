"""One long-lived shell per container that runs every tool call (`sandbox.docker.exec_mode: shell`).

A `docker exec` per call costs three engine round trips (create, start, inspect) and a runc exec
in the engine; through the shell a call costs one write on the exec's stdin and the reads of its
output. Each call still runs in a new process with the per-call exec's scripts (RUN_SCRIPT,
READ_SCRIPT, WRITE_SCRIPT): same user, capabilities and limits (the shell is itself an exec of the
container), its own working dir and a fresh environment, its own exit code, timeout and output cap.

Protocol. The runner writes a header line `op nonce len max path` and `len` bytes of payload (the
command or the file's content). The shell prints `S<nonce>` on stdout, runs the op, then
`E<nonce> <exit code>` on stdout and on stderr. The nonce is random per call and never enters a
command's process (it reaches the shell on stdin only), so no output can end a call early. Output
that arrives before a call's start marker was written by a background process of an earlier
command: it is dropped, and the shell is replaced after that call.
"""

from __future__ import annotations

import secrets
import socket
import struct
import threading
from collections.abc import Callable

from docker.api import APIClient

from hermes_runner.errors import ToolError
from hermes_runner.sandbox.base import READ_SCRIPT, WRITE_SCRIPT, OutputCap, check_read, check_write
from hermes_runner.sandbox.docker.exec import RUN_ENV_SCRIPT, RUN_SCRIPT, CommandOutput, limited, sh_argv

# $1 .. $4: the run, read, write and run-from-the-environment scripts. `line` reads a short command's
# `len` lines with the shell's own `read` (no process but the command's shell); `run` reads `len` bytes
# of any command with `head`. The pipeline's ( ... ) always drains the payload, so the next header is
# read where it starts even when the op exits early (no working dir, a failed mkdir).
SERVER_SCRIPT = """s=/bin/sh; [ -x /bin/bash ] && s=/bin/bash
echo "$$"
while read -r op n len max p; do
  printf 'S%s\\n' "$n"
  case $op in
    line) c=; i=0
      while [ "$i" -lt "$len" ] && IFS= read -r l; do c="$c$l
"; i=$((i + 1)); done
      __hr_cmd=$c "$s" -c "$4" hermes-runner "$p" </dev/null ;;
    run) head -c "$len" | ( "$s" -c "$1" hermes-runner "$p"; r=$?; cat >/dev/null; exit $r ) ;;
    read) /bin/sh -c "$2" hermes-runner "$p" "$max" </dev/null ;;
    write) head -c "$len" | ( /bin/sh -c "$3" hermes-runner "$p"; r=$?; cat >/dev/null; exit $r ) ;;
    *) false ;;
  esac
  r=$?
  printf 'E%s %d\\n' "$n" "$r"
  printf 'E%s %d\\n' "$n" "$r" >&2
done
"""
STDOUT, STDERR = 1, 2
RECV = 256 * 1024
MAX_LINE_COMMAND = 16 * 1024  # larger commands (or with NUL bytes) go by `head`, not through the environment
MAX_LINES = 256
DIED = "\n[the sandbox's shell ended during this command (exit code {code}); the next command gets a new one]"


class ShellDied(Exception):
    """The shell's stream ended before the call's end marker; `started`: the op had begun."""

    def __init__(self, started: bool):
        super().__init__("the sandbox shell ended")
        self.started = started


def framed(command: str) -> tuple[str, int, bytes]:
    """The op, size field and payload of a command: `line` (its lines) when short, else `run` (its bytes)."""
    data = command.encode(errors="surrogateescape")
    if len(data) <= MAX_LINE_COMMAND and b"\0" not in data:
        if not data.endswith(b"\n"):
            data += b"\n"  # the shell reads whole lines; a command's trailing newlines change nothing
        lines = data.count(b"\n")
        if lines <= MAX_LINES:
            return "line", lines, data
    return "run", len(data), data


def usable_path(path: str) -> bool:
    """Whether a path survives the header line (`read -r` splits on whitespace, ends at a newline)."""
    return bool(path) and path == path.strip() and "\n" not in path and "\r" not in path


class Demux:
    """Splits Docker's multiplexed attach stream (8-byte headers: stream, size) into (stream, bytes)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self.buf += data
        out = []
        while len(self.buf) >= 8:
            stream, size = struct.unpack(">BxxxL", self.buf[:8])
            if len(self.buf) < 8 + size:
                break
            out.append((stream, bytes(self.buf[8 : 8 + size])))
            del self.buf[: 8 + size]
        return out


def partial(data: bytearray, marker: bytes) -> int:
    """Length of the longest end of `data` that is a beginning of `marker` (it may be cut there)."""
    for k in range(min(len(data), len(marker) - 1), 0, -1):
        if data.endswith(marker[:k]):
            return k
    return 0


class Until:
    """One stream of one call: passes the bytes before `marker`, then reads the exit code after it."""

    def __init__(self, marker: bytes):
        self.marker = marker
        self.held = bytearray()
        self.code: int | None = None

    @property
    def done(self) -> bool:
        return self.code is not None

    def feed(self, chunk: bytes) -> bytes:
        """Return the bytes that are surely output; hold back what may be the start of the marker."""
        self.held += chunk
        i = self.held.find(self.marker)
        if i < 0:
            cut = len(self.held) - partial(self.held, self.marker)
            out = bytes(self.held[:cut])
            del self.held[:cut]
            return out
        out = bytes(self.held[:i])
        del self.held[:i]
        nl = self.held.find(b"\n")
        if nl >= 0:
            self.code = int(self.held[len(self.marker) : nl])
            del self.held[: nl + 1]
        return out


class Call:
    """The parser of one call's frames: the start marker, then each stream up to its end marker."""

    def __init__(self, nonce: str):
        self.start = f"S{nonce}\n".encode()
        self.started = False
        self.stray = 0  # bytes before the start marker: a background process of an earlier command
        self.pre = bytearray()
        self.out = Until(f"E{nonce} ".encode())
        self.err = Until(f"E{nonce} ".encode())

    @property
    def done(self) -> bool:
        return self.out.done and self.err.done

    def feed(self, stream: int, chunk: bytes) -> tuple[bytes, bytes]:
        """Return (stdout, stderr) output of the call in `chunk`."""
        if stream == STDERR:
            return b"", b"" if self.err.done else self.err.feed(chunk)
        if self.out.done:
            return b"", b""
        if not self.started:
            self.pre += chunk
            i = self.pre.find(self.start)
            if i < 0:
                cut = len(self.pre) - partial(self.pre, self.start)
                self.stray += cut
                del self.pre[:cut]
                return b"", b""
            self.stray += i
            self.started = True
            chunk = bytes(self.pre[i + len(self.start) :])
            self.pre.clear()
        return self.out.feed(chunk), b""


class Shell:
    """The long-lived shell of one container; one call at a time (`lock`), blocking (run in a thread)."""

    def __init__(self, api: APIClient, cid: str):
        self.api = api
        self.cid = cid
        self.eid = api.exec_create(
            cid, sh_argv(limited(cid, SERVER_SCRIPT), RUN_SCRIPT, READ_SCRIPT, WRITE_SCRIPT, RUN_ENV_SCRIPT), stdin=True
        )["Id"]
        self.sock = api.exec_start(self.eid, socket=True)
        self.raw = getattr(self.sock, "_sock", self.sock)
        self.demux = Demux()
        self.frames: list[tuple[int, bytes]] = []
        self.lock = threading.Lock()
        self.dead = False
        self.pid = 0
        line = bytearray()
        while b"\n" not in line:
            stream, chunk = self._next()
            if stream == STDOUT:
                line += chunk
        head, _, rest = bytes(line).partition(b"\n")
        self.pid = int(head)
        if rest:
            self.frames.insert(0, (STDOUT, rest))

    def _next(self) -> tuple[int, bytes]:
        while not self.frames:
            try:
                data = self.raw.recv(RECV)
            except OSError:
                data = b""
            if not data:
                self.dead = True
                raise ShellDied(False)
            self.frames.extend(self.demux.feed(data))
        return self.frames.pop(0)

    def _call(
        self, op: str, path: str, payload: bytes, limit: int, on_out: Callable[[bytes], None], size: int = -1
    ) -> tuple:
        """Send one op and feed its stdout to `on_out`; return (exit code, stderr head, stray bytes)."""
        nonce = secrets.token_hex(16)
        call = Call(nonce)
        err = bytearray()
        size = len(payload) if size < 0 else size
        try:
            self.raw.sendall(f"{op} {nonce} {size} {limit} {path}\n".encode(errors="surrogateescape"))
            if payload:
                self.raw.sendall(payload)
        except OSError:
            self.dead = True
            raise ShellDied(False) from None
        failed: ToolError | None = None  # raised once the call's output is all read (the shell stays in step)
        try:
            while not call.done:
                stream, chunk = self._next()
                out, e = call.feed(stream, chunk)
                if out and failed is None:
                    try:
                        on_out(out)
                    except ToolError as exc:
                        failed = exc
                if len(err) < 2000:
                    err += e[:2000]
        except ShellDied:
            raise ShellDied(call.started) from None
        if call.stray:  # a background process writes to this shell: the next call gets a clean one
            self.close()
        if failed is not None:
            raise failed
        return call.out.code, err.decode(errors="replace"), call.stray

    def run(self, command: str, workdir: str, cap: OutputCap, on_pid: Callable[[int], None]) -> int:
        out = CommandOutput(cap, on_pid, workdir)
        op, size, payload = framed(command)
        code, _, _ = self._call(op, workdir, payload, 0, out.feed, size)
        return out.finish(code)

    def read_file(self, path: str, max_bytes: int) -> bytes:
        data = bytearray()

        def keep(chunk: bytes) -> None:
            if len(data) <= max_bytes:
                data.extend(chunk)

        code, err, _ = self._call("read", path, b"", max_bytes + 1, keep)
        if len(data) > max_bytes:
            raise ToolError(f"{path} is larger than {max_bytes} bytes; read it in the terminal instead")
        check_read(path, code, err)
        return bytes(data)

    def write_file(self, path: str, data: bytes) -> None:
        code, err, _ = self._call("write", path, data, 0, lambda _: None)
        check_write(path, code, err)

    def exit_code(self) -> int:
        """The shell's own exit code once it ended (137 when it was killed, 1 if unknown)."""
        try:
            code = self.api.exec_inspect(self.eid)["ExitCode"]
        except Exception:  # noqa: BLE001 - any engine error: the code is unknown
            return 1
        return 1 if code is None else int(code)

    def close(self) -> None:
        """End the shell: EOF on its stdin ends its loop; a blocked reader wakes up."""
        self.dead = True
        for how in (socket.SHUT_RDWR,):
            try:
                self.raw.shutdown(how)
            except OSError:
                pass
        try:
            self.sock.close()
        except OSError:
            pass
