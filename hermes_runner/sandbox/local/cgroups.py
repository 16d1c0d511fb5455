"""Per-prompt cgroups for the local sandbox: a pids, memory and CPU limit on everything a prompt runs.

Both layouts are handled: cgroup v1 (one hierarchy per controller, as on hybrid hosts) and cgroup v2 (the unified
hierarchy, where our own cgroup must be able to delegate the controllers). A run gets `hermes-<run>-<pid>/` under
the runner's own cgroup, and each uid slot of the local sandbox a child of it (one prompt at a time uses a slot).
Commands join their prompt's cgroup before bubblewrap starts (a tiny `sh` writes its own pid into `cgroup.procs`,
then execs), so nothing the command forks escapes it. When no writable hierarchy has the controllers,
`Cgroups.open` returns None and the sandbox falls back to rlimits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CONTROLLERS = ("pids", "memory", "cpu")
CPU_PERIOD_US = 100_000
# Joins the cgroups named before "--", then execs the rest (run by /bin/sh outside the sandbox).
JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


@dataclass(frozen=True)
class Limits:
    pids: int  # max processes and threads (0: none)
    memory: int  # bytes, no swap on top (0: none)
    cpus: float  # cores (0: none)


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, options) of every cgroup mount."""
    found = []
    with contextlib.suppress(OSError), open("/proc/self/mounts") as fp:
        for line in fp:
            parts = line.split()
            if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
                found.append((parts[1].replace("\\040", " "), parts[2], set(parts[3].split(","))))
    return found


def _own() -> dict[str, str]:
    """The runner's cgroup per v1 controller ("" key: the v2 path)."""
    own: dict[str, str] = {}
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as fp:
        for line in fp:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                own[c] = path
    return own


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fp:
        fp.write(value)


class Cgroups:
    """The run's cgroup dirs; `make(name)` gives a child's join files; `close` removes them all."""

    def __init__(self, version: int, bases: list[Path]):
        self.version = version
        self.bases = bases  # the run's dir in each hierarchy used (v2: one)

    @classmethod
    def open(cls, run_token: str) -> Cgroups | None:
        """Create the run's cgroups, or None when this host cannot give them (with the reason logged)."""
        name = f"hermes-{run_token}"
        try:
            return cls._open_v1(name) or cls._open_v2(name)
        except OSError as exc:
            log.info("cgroups unavailable (%s): the local sandbox uses rlimits", exc)
            return None

    @classmethod
    def _open_v1(cls, name: str) -> Cgroups | None:
        own = _own()
        mounts = {c: m for m, kind, opts in _mounts() if kind == "cgroup" for c in CONTROLLERS if c in opts}
        if set(mounts) != set(CONTROLLERS) or not all(c in own for c in CONTROLLERS):
            return None
        bases = []
        for c in CONTROLLERS:
            base = Path(mounts[c]) / own[c].lstrip("/") / name
            if base in bases:  # cpu,cpuacct co-mounted with another controller
                continue
            _remove_dead(base.parent)
            base.mkdir(exist_ok=True)
            bases.append(base)
        return cls(1, bases)

    @classmethod
    def _open_v2(cls, name: str) -> Cgroups | None:
        mount = next((m for m, kind, _ in _mounts() if kind == "cgroup2"), None)
        own = _own().get("")
        if mount is None or own is None:
            return None
        parent = Path(mount) / own.lstrip("/")
        have = set((parent / "cgroup.controllers").read_text().split())
        if not set(CONTROLLERS) <= have:
            return None
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
        if not set(CONTROLLERS) <= enabled:
            # EBUSY unless our cgroup is the root one or holds no process (the runner is in it)
            _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
        base = parent / name
        _remove_dead(parent)
        base.mkdir(exist_ok=True)
        _write(base / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
        return cls(2, [base])

    def make(self, name: str, limits: Limits) -> list[str]:
        """Create a child cgroup with `limits`; return the `cgroup.procs` files a command joins."""
        procs = []
        for base in self.bases:
            d = base / name
            d.mkdir()
            if self.version == 2:
                if limits.pids:
                    _write(d / "pids.max", str(limits.pids))
                if limits.memory:
                    _write(d / "memory.max", str(limits.memory))
                    with contextlib.suppress(OSError):
                        _write(d / "memory.swap.max", "0")
                if limits.cpus:
                    _write(d / "cpu.max", f"{int(limits.cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
            else:
                if limits.pids and (d / "pids.max").exists():
                    _write(d / "pids.max", str(limits.pids))
                if limits.memory and (d / "memory.limit_in_bytes").exists():
                    _write(d / "memory.limit_in_bytes", str(limits.memory))
                    with contextlib.suppress(OSError):  # no swap accounting on this kernel
                        _write(d / "memory.memsw.limit_in_bytes", str(limits.memory))
                if limits.cpus and (d / "cpu.cfs_quota_us").exists():
                    _write(d / "cpu.cfs_period_us", str(CPU_PERIOD_US))
                    _write(d / "cpu.cfs_quota_us", str(int(limits.cpus * CPU_PERIOD_US)))
            procs.append(str(d / "cgroup.procs"))
        return procs

    def close(self, wait_s: float = 2.0) -> None:
        """Remove the run's cgroups; a killed command's processes may take a moment to leave them, and what is
        still in one after `wait_s` is killed (and logged as an error): nothing outlives the run."""
        deadline = time.monotonic() + wait_s
        for base in self.bases:
            killed = False
            while True:
                for d in list(base.iterdir()) if base.is_dir() else []:
                    if d.is_dir():
                        with contextlib.suppress(OSError):
                            os.rmdir(d)
                with contextlib.suppress(OSError):
                    os.rmdir(base)
                if not base.exists():
                    break
                if time.monotonic() > deadline:
                    procs = [str(d / "cgroup.procs") for d in base.iterdir() if d.is_dir()]
                    if not killed and (left := procs_in(procs) - {os.getpid()}):
                        log.error("%d processes were left in %s at the run's end: killed", len(left), base)
                        kill_procs(procs, {os.getpid()})
                        killed, deadline = True, time.monotonic() + wait_s
                        continue
                    log.error("cannot remove the cgroup %s", base)
                    break
                time.sleep(0.05)


def procs_in(files: list[str]) -> set[int]:
    """The processes in the cgroups whose `cgroup.procs` files are given."""
    pids: set[int] = set()
    for f in files:
        with contextlib.suppress(OSError), open(f) as fp:
            pids.update(int(p) for p in fp.read().split())
    return pids


def kill_procs(files: list[str], keep: set[int], wait_s: float = 5.0) -> set[int]:
    """SIGKILL every process in those cgroups but `keep`, until none is left or `wait_s` is over; what is left."""
    deadline = time.monotonic() + wait_s
    while (left := procs_in(files) - keep) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    return left


def procs_of_uid(uid: int, pids: list[int] | None = None) -> list[int]:
    """The processes (of `pids`, else all) whose real, effective or saved uid is `uid`."""
    if pids is None:
        pids = [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]
    found = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as fp:
                uids = next(line for line in fp if line.startswith("Uid:")).split()[1:4]
        except (OSError, StopIteration):
            continue
        if str(uid) in uids:
            found.append(pid)
    return found


def kill_uid(uid: int, wait_s: float) -> bool:
    """SIGKILL every process of `uid` (its real, effective or saved uid) until none is left; True if any was."""
    found = False
    deadline = time.monotonic() + wait_s
    while (pids := procs_of_uid(uid)) and time.monotonic() < deadline:
        found = True
        for pid in pids:
            with contextlib.suppress(OSError):
                fd = os.pidfd_open(pid)  # the process itself, even if its pid is reused meanwhile
                try:
                    if pid in procs_of_uid(uid, [pid]):
                        signal.pidfd_send_signal(fd, signal.SIGKILL)
                finally:
                    os.close(fd)
        time.sleep(0.02)
    return found


def _remove_dead(parent: Path) -> None:
    """rmdir the run cgroups of dead runners (`hermes-<run>-<pid>-<n>`); rmdir only ever removes empty ones."""
    from hermes_runner.sandbox.base import pid_alive

    for d in parent.glob("hermes-*"):
        pid = d.name.rsplit("-", 2)[-2] if d.name.count("-") >= 3 else ""
        if not pid.isdigit() or pid_alive(int(pid)):
            continue
        for child in d.iterdir():
            if child.is_dir():
                with contextlib.suppress(OSError):
                    os.rmdir(child)
        with contextlib.suppress(OSError):
            os.rmdir(d)
