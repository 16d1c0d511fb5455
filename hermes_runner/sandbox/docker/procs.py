"""A container's processes, found and killed from the host through /proc, without the engine.

For a container the engine cannot remove (its runtime could not fork, it timed out, ...): nothing it
started may outlive its prompt. Its processes are the container's pid namespace (that of the init
pid the engine reported), and the trees under the engine's own process for it (conmon, a containerd
shim: their command lines name the container id), which also holds `exec` sessions. Each is stopped
first (a stopped process cannot fork), then killed; killing the namespace's init makes the kernel
kill every other member too. Needs the right to signal them: root, or the container's own uid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

ENGINE_PROCESSES = ("conmon", "containerd-shim", "docker-containerd-shim")  # their children are the container's
ROUNDS = 20  # scans (a process forked between a scan and the kill is found by the next one)


@dataclass
class Killed:
    """What `kill` did: processes signalled, and those it could not signal (pid: reason)."""

    pids: set[int] = field(default_factory=set)
    denied: dict[int, str] = field(default_factory=dict)
    left: set[int] = field(default_factory=set)  # still there after the last round

    def describe(self) -> str:
        text = f"killed {len(self.pids)} of its processes"
        if self.denied:
            pid, why = next(iter(self.denied.items()))
            text += f", {len(self.denied)} could not be signalled (pid {pid}: {why})"
        if self.left:
            text += f", {len(self.left)} still running (pids {sorted(self.left)[:5]})"
        return text


def _stat(pid: int) -> tuple[str, int] | None:
    """(comm, ppid) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fp:
            data = fp.read().decode(errors="replace")
    except OSError:
        return None
    comm = data[data.find("(") + 1 : data.rfind(")")]
    return comm, int(data[data.rfind(")") + 2 :].split()[1])


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fp:
            return fp.read()
    except OSError:
        return b""


def _pid_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _all_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def container_pids(cid: str, init_pid: int | None = None) -> set[int]:
    """Host pids of the container's processes (see the module's docstring); never the engine's own."""
    pids = _all_pids()
    parent: dict[int, int] = {}
    roots: set[int] = set()
    needle = cid.encode()
    for pid in pids:
        st = _stat(pid)
        if st is None:
            continue
        comm, ppid = st
        parent[pid] = ppid
        if comm.startswith(ENGINE_PROCESSES) and needle in _cmdline(pid):
            roots.add(pid)
    found: set[int] = set()
    own_ns = _pid_ns(os.getpid())
    ns = _pid_ns(init_pid) if init_pid else None
    if ns is not None and ns != own_ns:  # a container of the host's pid namespace has no namespace to kill
        found.add(init_pid)
        found.update(pid for pid in pids if pid not in roots and _pid_ns(pid) == ns)
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    todo = [c for r in roots for c in children.get(r, ())]
    if init_pid and ns is not None and ns != own_ns:
        todo.append(init_pid)
    while todo:
        pid = todo.pop()
        if pid in roots:
            continue
        found.add(pid)
        todo.extend(c for c in children.get(pid, ()) if c not in found)
    found.discard(os.getpid())
    return found


def _signal(pids: Iterable[int], sig: int, done: Killed) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
            done.pids.add(pid)
        except ProcessLookupError:
            pass
        except PermissionError as exc:
            done.denied[pid] = exc.strerror or "permission denied"


def kill(cid: str, init_pid: int | None = None, timeout: float = 10.0) -> Killed:
    """Stop, then kill, every process of the container until none is left (or `timeout` seconds pass)."""
    done = Killed()
    end = time.monotonic() + timeout
    for _ in range(ROUNDS):
        pids = container_pids(cid, init_pid) - set(done.denied)
        if not pids:
            done.left = set()
            return done
        _signal(sorted(pids), signal.SIGSTOP, done)
        _signal(sorted(pids), signal.SIGKILL, done)
        _wait_gone(pids, end)
        done.left = {p for p in pids if _alive(p)}
        if time.monotonic() > end:
            break
    done.left |= container_pids(cid, init_pid)
    return done


def _alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fp:
            data = fp.read()
    except OSError:
        return False
    return data[data.rfind(b")") + 2 : data.rfind(b")") + 3] != b"Z"


def _wait_gone(pids: set[int], end: float) -> None:
    """Until the killed processes are gone (or zombies), at most until `end`."""
    delay = 0.005
    while time.monotonic() < end and any(_alive(p) for p in pids):
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def init_pid(api, cid: str) -> int | None:
    """The host pid of the container's init, as the engine reports it (None: not running, or no answer)."""
    with contextlib.suppress(Exception):  # noqa: BLE001 - the engine that failed to remove it may fail here too
        pid = int(((api.inspect_container(cid) or {}).get("State") or {}).get("Pid") or 0)
        return pid or None
    return None
