"""How the local sandbox confines a command on this host: bubblewrap's arguments, the uid drop, the seccomp
filter, the cgroup of each uid slot (and its spawner thread on cgroup v1), the rlimits; what is missing for it."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hermes_runner.config import LocalIsolation, LocalSandboxOptions, size_of
from hermes_runner.sandbox.base import SAFE_ENV_KEYS
from hermes_runner.sandbox.local.cgroups import Cgroups, Limits
from hermes_runner.sandbox.local.spawn import fd_arg

log = logging.getLogger(__name__)

NO_WORKDIR = "hermes-runner:no-workdir"
SHM_BYTES = 256 << 20  # the sandbox's /dev/shm (tmpfs; what it holds counts against the memory limit)

# bash, in the sandbox: $1 = working dir; the command comes on stdin (never argv: no size limit).
LAUNCH = """cd -- "$1" 2>/dev/null || {{ printf '%s' {nodir}; exit 199; }}
{limits}IFS= read -r -d '' __hr_cmd
exec </dev/null
set --
eval "unset __hr_cmd; $__hr_cmd"
"""


class Confinement:
    """The confinement of a local backend's commands: the tools, the limits and the arguments they are run with."""

    def __init__(self, o: LocalSandboxOptions):
        self.options = o
        self.shell = shutil.which("bash") or "/bin/sh"
        self.sh = shutil.which("sh") or "/bin/sh"
        self.env = {k: os.environ[k] for k in SAFE_ENV_KEYS if k in os.environ}  # the host env a command may see
        self.env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        self.env["TERM"] = "dumb"
        self.isolation = LocalIsolation(o.isolation)  # (config's Enum: its value is checked at compose time)
        self.disk = size_of(o.disk_limit, "sandbox.local.disk_limit")
        self.limits = Limits(o.pids_limit, size_of(o.mem_limit, "sandbox.local.mem_limit"), o.cpus)
        self.confined = self.isolation is not LocalIsolation.none
        self.drop_uid = self.confined and os.geteuid() == 0
        self.bwrap = shutil.which("bwrap") or ""
        self.setpriv = shutil.which("setpriv") or ""
        self.bwrap_static: list[str] = []
        self.files: tuple[bytes, ...] = ()  # what bubblewrap reads from fds (the seccomp filter)
        self.disk_tmpfs = False  # the disk limit is a tmpfs per prompt (else, when set, the watchdog)
        self.launch = LAUNCH.format(nodir=NO_WORKDIR, limits=self._fsize())
        self.cgroups: Cgroups | None = None
        self._slot_cgroups: dict[int, list[str]] = {}
        self._spawners: dict[int, ThreadPoolExecutor] = {}

    def missing_tools(self) -> list[str]:
        """What this host lacks to confine commands: bubblewrap, setpriv (a root runner), the seccomp filter."""
        missing = []
        if not self.bwrap:
            missing.append("bubblewrap is not installed (apt-get install bubblewrap)")
        if self.drop_uid and not self.setpriv:
            missing.append("setpriv (util-linux) is not installed: a root runner cannot drop to an unprivileged uid")
        if not missing and self.options.seccomp:
            try:
                from hermes_runner.sandbox.local.seccomp import compile_filter

                self.files = (compile_filter(),)
            except (ImportError, OSError, RuntimeError) as exc:
                missing.append(
                    f"its seccomp filter cannot be built ({exc}; it needs pyseccomp and libseccomp2): "
                    "sandbox.local.seccomp=false runs without one"
                )
        return missing

    def _static_args(self) -> list[str]:
        args = [self.bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
        if not self.options.network:
            args.append("--unshare-net")
        if not self.drop_uid:  # an unprivileged runner: a user namespace, and no nested ones
            args += ["--unshare-user", "--disable-userns"]
        args += ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
        if self.files:  # loaded after bubblewrap's own set-up, right before the command
            args += ["--seccomp", fd_arg(0)]
        paths = self.options.system_paths
        for p in paths:
            if os.path.islink(p):
                args += ["--symlink", os.readlink(p), p]
            elif os.path.exists(p):
                args += [*_parents(p, paths), "--ro-bind", p, p]
        # /dev/shm: the prompt's own, for POSIX semaphores and shared memory (multiprocessing)
        shm = ["--perms", "1777", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
        return args + ["--dev", "/dev", *shm, "--proc", "/proc"]

    def _rlimits(self) -> str:
        lines = []
        if self.limits.pids:
            lines.append(f"ulimit -u {self.limits.pids} 2>/dev/null\n")
        if self.limits.memory and self.cgroups is None:
            lines.append(f"ulimit -v {max(1, self.limits.memory // 1024)} 2>/dev/null\n")
        return "".join(lines) + self._fsize()

    def _fsize(self) -> str:
        """`ulimit -f`: no file grows past the disk limit (SIGXFSZ), whatever else the cap is (bash: KiB units)."""
        if not self.disk:
            return ""
        unit = 1024 if os.path.basename(self.shell) == "bash" else 512
        return f"ulimit -f {max(1, self.disk // unit)} 2>/dev/null\n"

    def _slot_cgroup(self, slot: int) -> list[str]:
        """The cgroup of a uid slot, made once and reused by the slot's later prompts.

        A prompt's processes are all gone when it ends (each command's pid namespace dies with
        it), so the next prompt of the slot starts with an empty cgroup of the same limits;
        making and removing a memory cgroup per prompt costs the runner ~5 ms of CPU.
        """
        procs = self._slot_cgroups.get(slot)
        if procs is None:
            procs = self._slot_cgroups[slot] = self.cgroups.make(f"slot-{slot}", self.cgroup_limits())
        return procs

    def cgroup_limits(self) -> Limits:
        """A slot cgroup's limits: with a tmpfs per prompt its files are charged to the cgroup's memory too, so
        the memory limit is mem_limit + disk_limit (processes keep mem_limit beside a full disk; without that, a
        prompt whose files filled its memory could not even run `rm`)."""
        if self.disk_tmpfs and self.limits.memory:
            return dataclasses.replace(self.limits, memory=self.limits.memory + self.disk)
        return self.limits

    def spawner(self, slot: int) -> ThreadPoolExecutor:
        """cgroup v1: a thread of the runner placed in the slot's cgroups (v1 places threads one by one).

        What it forks starts in those cgroups, so a command needs no move of its own: on v1 each
        move takes a kernel-wide lock that concurrent prompts would contend for (measured: twice
        the time per command at 64 prompts in flight).
        """
        pool = self._spawners.get(slot)
        if pool is None:
            tasks = [str(Path(p).with_name("tasks")) for p in self._slot_cgroups[slot]]

            def enter() -> None:
                tid = str(threading.get_native_id())
                for t in tasks:
                    with open(t, "w") as fp:
                        fp.write(tid)

            pool = self._spawners[slot] = ThreadPoolExecutor(1, f"local-sandbox-slot{slot}", enter)
        return pool

    def describe(self) -> None:
        """Log how commands are confined."""
        if not self.confined:
            log.warning(
                "sandbox.local.isolation=none: commands run unconfined on this host as %s%s",
                "root" if os.geteuid() == 0 else "the runner's user",
                "; the disk limit watches only the prompt's own dir" if self.disk else "",
            )
            return
        disk = "-"
        if self.disk:
            disk = f"{self.options.disk_limit} ({'a tmpfs per prompt' if self.disk_tmpfs else 'a watchdog'})"
        log.info(
            "local sandbox: bubblewrap, %s, limits by %s (pids %s, memory %s%s, cpus %s, disk %s), seccomp %s",
            "a uid of its own per prompt" if self.drop_uid else "the runner's uid in a user namespace",
            f"cgroup v{self.cgroups.version}" if self.cgroups else "rlimits",
            self.limits.pids or "-",
            self.options.mem_limit or "-",
            " + the disk's tmpfs" if self.cgroup_limits() is not self.limits else "",
            (self.limits.cpus or "-") if self.cgroups else "- (needs cgroups)",
            disk,
            "on" if self.files else "off",
        )

    def judge_probe(self, code: int, text: str, err: str) -> list[str]:
        """What is wrong with the confinement, from a probe that printed its /proc/self/status and `ls -d /run`."""
        if code != 0 or "CapEff:" not in text:
            return [f"a bubblewrap sandbox fails to start here: {err.strip() or f'exit code {code}'}"]
        keys = ("Uid:", "CapEff:", "Seccomp:")
        status = dict(line.split(":", 1) for line in text.splitlines() if line.startswith(keys))
        problems = []
        if status.get("Uid", "").split()[:1] == ["0"]:
            problems.append("commands would run as uid 0")
        if int(status.get("CapEff", "0").strip() or "0", 16):
            problems.append(f"commands would keep capabilities (CapEff {status['CapEff'].strip()})")
        if self.files and status.get("Seccomp", "").strip() != "2":
            problems.append("its seccomp filter is not applied to commands")
        if text.count("No such file") < 2:
            problems.append("/run or /var/run would be visible in the sandbox")
        return problems


def _parents(path: str, bound: list[str]) -> list[str]:
    """A nested path's parents (not inside another bound path), made traversable: bubblewrap would make them 0700,
    root's (e.g. a virtualenv of agent.install under /root or /work)."""
    out = []
    for parent in reversed(Path(path).parents):
        p = str(parent)
        if p != "/" and not any(p == b or p.startswith(b.rstrip("/") + "/") for b in bound):
            out += ["--perms", "0755", "--dir", p]
    return out
