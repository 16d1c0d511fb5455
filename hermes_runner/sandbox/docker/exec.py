"""Commands and file I/O inside a running container, through `docker exec` (blocking; run in threads).

Everything happens in the container as its user: files are read with `cat` and written
through the exec's stdin, so permissions, tmpfs mounts and the read-only root behave exactly
as they do for the model's own commands.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from docker.api import APIClient
from docker.utils.socket import frames_iter

from hermes_runner.errors import SandboxError, ToolError
from hermes_runner.sandbox.base import READ_SCRIPT, WRITE_SCRIPT, OutputCap, check_read, check_write

# $1 = working dir; the command comes on stdin (never argv: a command of any size runs). The first
# output line is the shell's pid (or "!nodir"), so a timeout can kill exactly this command's process
# tree; stderr joins stdout in order. Run by bash when the image has it, else by sh. stdin is always read to
# its end (Podman loses the output of a process that exits with its stdin unread).
_RUN_START = """cd -- "$1" 2>/dev/null || { echo '!nodir'; cat >/dev/null; exit 1; }
echo "$$"
"""
_RUN_END = """exec 2>&1 </dev/null
set --
eval "unset __hr_cmd; $__hr_cmd"
"""
RUN_SCRIPT = _RUN_START + "__hr_cmd=$(cat)\n" + _RUN_END
# The same with the command already in the environment variable __hr_cmd (the long-lived shell's
# short commands: no process to read stdin); the eval unsets it before the command runs.
RUN_ENV_SCRIPT = _RUN_START + _RUN_END
PICK_SHELL = 's=$1; shift; [ -x /bin/bash ] && exec /bin/bash -c "$s" hermes-runner "$@"; exec /bin/sh -c "$s" hermes-runner "$@"'

# $1 = pid: stop the tree top-down (a stopped process cannot fork), then kill it.
KILL_SCRIPT = """k() {
  kill -STOP "$1" 2>/dev/null
  for t in /proc/"$1"/task/*/children; do
    for c in $(cat "$t" 2>/dev/null); do k "$c"; done
  done
  kill -KILL "$1" 2>/dev/null
}
k "$1"
"""

NO_DIR = b"!nodir"
NOT_STARTED = (
    "[the command could not be started in the container (exit code {code}): too many processes "
    "(pids limit), memory exhausted, or no /bin/sh]"
)


def sh_argv(script: str, *args: str) -> list[str]:
    return ["/bin/sh", "-c", script, "hermes-runner", *args]


# Where the engine sets no cgroup limits (rootless Podman on cgroup v1, whose compat API also drops a container's
# ulimits): the rlimits every command of the model starts under, by container id. The shell that runs a command
# (or the long-lived one) sets them first, hard and soft, and the command can never raise them (no
# CAP_SYS_RESOURCE); a shell that cannot set them runs nothing (fail closed). The runner's own execs (kills, file
# ops) keep the container's defaults, so they still start when the command's processes are at the limit.
_LIMITS: dict[str, str] = {}
LIMITS_SCRIPT = """ulimit -u {nproc} 2>/dev/null || ulimit -p {nproc} 2>/dev/null || {{ echo; echo 'hermes-runner: cannot set the process limit (ulimit -u)'; exit 125; }}
{data}"""
DATA_LIMIT = "ulimit -d {kb} 2>/dev/null || {{ echo; echo 'hermes-runner: cannot set the memory limit (ulimit -d)'; exit 125; }}\n"


def set_limits(cid: str, nproc: int, data_bytes: int) -> None:
    """Commands in container `cid` run with at most `nproc` processes of its uid and `data_bytes` of data each."""
    data = DATA_LIMIT.format(kb=max(1, data_bytes // 1024)) if data_bytes else ""
    _LIMITS[cid] = LIMITS_SCRIPT.format(nproc=nproc, data=data)


def forget(cid: str) -> None:
    _LIMITS.pop(cid, None)


def limited(cid: str, script: str) -> str:
    """`script`, after the container's command limits (if any)."""
    prefix = _LIMITS.get(cid)
    return prefix + "\n" + script if prefix else script


class CommandOutput:
    """A command's output stream: the first line is RUN_SCRIPT's pid (or "!nodir"), the rest goes to `cap`."""

    def __init__(self, cap: OutputCap, on_pid: Callable[[int], None], workdir: str):
        self.cap = cap
        self.on_pid = on_pid
        self.workdir = workdir
        self.first = bytearray()
        self.seen_first = False

    def feed(self, chunk: bytes) -> None:
        if self.seen_first:
            self.cap.feed(chunk)
            return
        self.first += chunk
        nl = self.first.find(b"\n")
        if nl < 0:
            return
        self.seen_first = True
        line = bytes(self.first[:nl])
        if line == NO_DIR:
            raise ToolError(f"workdir does not exist: {self.workdir}")
        if line.isdigit():
            self.on_pid(int(line))
        self.cap.feed(bytes(self.first[nl + 1 :]))

    def finish(self, code: int | None) -> int:
        """The command's exit code; when the shell never ran, what it printed (or why it could not start)."""
        code = 1 if code is None else int(code)
        if not self.seen_first:
            self.cap.feed(bytes(self.first) or NOT_STARTED.format(code=code).encode())
        return code


def run_command(
    api: APIClient,
    cid: str,
    command: str,
    workdir: str,
    env: dict[str, str],
    cap: OutputCap,
    on_pid: Callable[[int], None],
) -> int:
    """Run `command` (sent on stdin) in `workdir`, feeding its output to `cap`; return its exit code."""
    argv = sh_argv(limited(cid, PICK_SHELL), RUN_SCRIPT, workdir)
    eid = api.exec_create(cid, argv, environment=env, stdin=True)["Id"]
    sock = api.exec_start(eid, socket=True)
    raw = getattr(sock, "_sock", sock)
    out = CommandOutput(cap, on_pid, workdir)
    try:
        try:
            raw.sendall(command.encode(errors="surrogateescape"))
            raw.shutdown(socket.SHUT_WR)  # EOF: the whole command is in
        except OSError:
            pass  # the shell exited first (no workdir); its output says why
        for _, chunk in frames_iter(sock, False):
            out.feed(chunk)
    finally:
        sock.close()
    return out.finish(api.exec_inspect(eid)["ExitCode"])


def kill_tree(api: APIClient, cid: str, pid: int) -> None:
    """Kill a process and all its descendants inside the container."""
    eid = api.exec_create(cid, sh_argv(KILL_SCRIPT, str(pid)))["Id"]
    api.exec_start(eid)


def read_file(api: APIClient, cid: str, path: str, max_bytes: int) -> bytes:
    eid = api.exec_create(cid, sh_argv(READ_SCRIPT, path, str(max_bytes + 1)))["Id"]
    stream = api.exec_start(eid, stream=True, demux=True)
    out = bytearray()
    err = bytearray()
    try:
        for stdout, stderr in stream:
            out += stdout or b""
            err += (stderr or b"")[:2000]
            if len(out) > max_bytes:
                raise ToolError(f"{path} is larger than {max_bytes} bytes; read it in the terminal instead")
    finally:
        stream.close()
    check_read(path, api.exec_inspect(eid)["ExitCode"], err.decode(errors="replace"))
    return bytes(out)


def feed(api: APIClient, cid: str, argv: list[str], data: bytes) -> tuple[int, str]:
    """Run `argv` in the container with `data` on its stdin: (exit code, the first 2,000 bytes of each output frame)."""
    eid = api.exec_create(cid, argv, stdin=True)["Id"]
    sock = api.exec_start(eid, socket=True)
    raw = getattr(sock, "_sock", sock)
    out = bytearray()
    try:
        try:
            raw.sendall(data)
            raw.shutdown(socket.SHUT_WR)  # EOF on the command's stdin
        except OSError:
            pass  # the command exited before reading everything; its exit code and output say why
        for _, chunk in frames_iter(sock, False):
            out += chunk[:2000]
    finally:
        sock.close()
    return api.exec_inspect(eid)["ExitCode"], out.decode(errors="replace")


def write_file(api: APIClient, cid: str, path: str, data: bytes) -> None:
    code, err = feed(api, cid, sh_argv(WRITE_SCRIPT, path), data)
    check_write(path, code, err)


# $1 = dir: unpack a tar from stdin into it, as the container's user, owners not restored (no CAP_CHOWN).
UNTAR_SCRIPT = 'tar -xof - -C "$1" 2>&1; s=$?; cat >/dev/null; exit "$s"'


def copy_in(api: APIClient, cid: str, path: str, cap: int) -> None:
    """Copy the image's content at `path` (under its tmpfs) into that tmpfs of `cap` bytes (0: no cap)."""
    bits, _ = api.get_archive(cid, path.rstrip("/") + "/.")
    data = bytearray()
    for chunk in bits:
        data += chunk
        if cap and len(data) > cap + (1 << 20):
            raise SandboxError(f"the image's {path} is larger than its tmpfs (size={cap} bytes): raise its size=")
    code, said = feed(api, cid, sh_argv(UNTAR_SCRIPT, path), bytes(data))
    if code:
        raise SandboxError(f"could not copy the image's {path} into its tmpfs (exit {code}): {said.strip()[-300:]}")
