"""Local sandbox: a fresh directory per prompt; every command and file access confined by bubblewrap.

Each command (and each read or write of the file tools) is a fresh bubblewrap sandbox that sees
only the read-only system paths (`sandbox.local.system_paths`), its own work dir and /tmp (both
writable), a private /dev and /proc, and no network. A root runner drops the command to an
unprivileged uid of its own per prompt with no capabilities (setpriv inside bubblewrap; confine.py),
under a seccomp filter (seccomp.py); everything a prompt runs joins its own cgroup with a pids, memory and
CPU limit (rlimits where cgroups cannot be had), and its work dir and /tmp share a disk cap (a
tmpfs per prompt for a root runner, else a watchdog; mounts.py). What a prompt leaves running is
killed at its end. When that confinement cannot be had, the run refuses to start and says what
is missing, unless `sandbox.local.isolation=none` opts out. See docs/sandboxes.md.

Nothing is read or written in the runner process: symlinks, /proc/self and permissions are
resolved inside the sandbox, as the command's own uid.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import os
import posixpath
import re
import socket
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hermes_runner.config import SandboxConfig
from hermes_runner.dataset import Prompt
from hermes_runner.errors import ConfigError, SandboxError, ToolError
from hermes_runner.sandbox.base import READ_SCRIPT, WRITE_SCRIPT, ExecResult, check_read, check_write, process_start
from hermes_runner.sandbox.local import watchdog as local_watchdog
from hermes_runner.sandbox.local.cgroups import JOIN_SCRIPT, Cgroups, kill_procs, kill_uid, procs_in
from hermes_runner.sandbox.local.confine import LAUNCH, NO_WORKDIR, Confinement
from hermes_runner.sandbox.local.mounts import copy_out, mount_tmpfs, remove_tree, usage
from hermes_runner.sandbox.local.spawn import run_command, run_io
from hermes_runner.sandbox.local.watchdog import MARKER, reap_orphans

log = logging.getLogger(__name__)

MAX_READ_BYTES = 64 * 1024 * 1024
IO_TIMEOUT_S = 60.0
UIDS_PER_RUNNER = 4096
WATCH_S = 0.2  # the disk watchdog's shortest interval between two walks of a prompt's dirs
WATCH_SHARE = 5  # ... and at least this many times the last walk's duration (a walk takes at most 1/5 of a core)
LEFTOVER_WAIT_S = 2.0  # how long a prompt's last processes may take to die (a fork bomb's) before they are killed
_FREE_SLOTS = list(range(UIDS_PER_RUNNER - 1, -1, -1))  # uid slots of this process, a stack: few, reused
_BACKENDS = itertools.count()


def default_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hermes-runner" / "sandboxes"


def safe_name(text: str, limit: int = 60) -> str:
    """A file name made of `text`: no `/`, no leading dot, never `..` (a run_name cannot leave the root)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).lstrip(".-")[:limit]
    return name or "run"


class LocalSandbox:
    def __init__(
        self,
        taskdir: Path,
        workdir: Path,
        tmpdir: Path,
        backend: LocalBackend,
        slot: int,
        uid: int,
        cg: list[str],
        mounted: bool = False,
        watch: list[tuple[Path, bool]] | None = None,
    ):
        self._taskdir = taskdir
        self.mounted = mounted  # a tmpfs of the disk limit's size is mounted on the task dir
        # the dirs the disk watchdog walks (with usage's `reopen`), and what they held at the start
        self._watch = watch or []
        self._watch_base = sum(usage(d, r) for d, r in self._watch)
        self.slot = slot
        self.released = False
        self._workdir = workdir
        self._tmpdir = tmpdir
        self._b = backend
        self._uid = uid
        self._cgroup = cg  # cgroup.procs files its commands join (cgroup v2)
        # cgroup v1: its commands are forked by a thread of its own that sits in its cgroups
        self._spawner = backend.spawner(slot) if backend.cgroups and backend.cgroups.version == 1 else None
        self.cwd = str(workdir)
        # the work dir's parents, made traversable (bubblewrap would make them 0700, root's)
        self._parents = [
            a
            for p in reversed(workdir.parents)
            if str(p) not in ("/", "/tmp")
            for a in ("--perms", "0755", "--dir", str(p))
        ]
        confined = backend.confined
        self._env = {**backend.env, "HOME": str(workdir), "TMPDIR": "/tmp" if confined else str(tmpdir)}

    def _wrap(self, argv: list[str], chdir: str | None = None, join: bool = True) -> list[str]:
        """argv confined: cgroup join (`join`), bubblewrap with this prompt's binds, the uid drop."""
        b = self._b
        if not b.confined:
            return argv
        join = join and self._cgroup and self._spawner is None
        full = [b.sh, "-c", JOIN_SCRIPT, "sh", *self._cgroup, "--"] if join else []
        full += b.bwrap_static
        full += ["--bind", str(self._tmpdir), "/tmp", *self._parents, "--bind", str(self._workdir), str(self._workdir)]
        if chdir:
            full += ["--chdir", chdir]
        full += ["--remount-ro", "/", "--"]
        if b.drop_uid:
            uid = str(self._uid)
            full += [b.setpriv, "--reuid", uid, "--regid", uid, "--clear-groups"]
            full += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        return full + argv

    async def run(self, command: str, timeout: float, workdir: str | None = None) -> ExecResult:
        wd = self._resolve(workdir) if workdir else self.cwd
        argv = [self._b.shell, "--noprofile", "--norc", "-c", self._b.launch, "bash", wd]
        stop = asyncio.get_running_loop().create_future() if self._watch else None
        watchdog = asyncio.ensure_future(self._watch_disk(stop)) if stop else None
        try:
            code, output, timed_out = await run_command(
                self._wrap(argv),
                env=self._env,
                cwd=None,
                timeout=timeout,
                limit=self._b.max_output,
                executor=self._spawner or self._b.pool,
                stdin=command.encode(errors="surrogateescape"),
                files=self._b.files,
                stop=stop,
            )
        finally:
            if watchdog:
                watchdog.cancel()
        if code == 199 and output == NO_WORKDIR:
            raise ToolError(f"workdir does not exist: {wd}")
        if stop is not None and stop.done():
            return ExecResult(code or 1, f"{output}\n[{self._disk_message(stop.result())}; the command was stopped]")
        return ExecResult(code, output, timed_out)

    # -- disk watchdog (no tmpfs could be mounted, or a row's own cwd) --------------------

    def _grown(self) -> int:
        """Bytes the watched dirs hold beyond what they held when the prompt started."""
        return sum(usage(d, r) for d, r in self._watch) - self._watch_base

    async def _watch_disk(self, stop: asyncio.Future) -> None:
        """While a command runs: walk its dirs now and then; over the limit, `stop` ends it (with the bytes held)."""
        loop = asyncio.get_running_loop()
        interval = WATCH_S
        while True:
            await asyncio.sleep(interval)
            t = time.monotonic()
            grown = await loop.run_in_executor(self._b.pool, self._grown)
            if grown > self._b.disk:
                stop.set_result(grown)
                return
            interval = max(WATCH_S, WATCH_SHARE * (time.monotonic() - t))

    def _disk_message(self, grown: int) -> str:
        where = "the work dir and /tmp" if self._watch[0][0] == self._taskdir else "the work dir"
        return (
            f"disk limit hit: {where} took {grown} bytes more than sandbox.local.disk_limit="
            f"{self._b.options.disk_limit} allows; delete files to go on"
        )

    async def _io(self, script: str, args: list[str], data: bytes | None, max_out: int) -> tuple[int, bytes, str]:
        """Run a helper script in this sandbox (as the command's uid), off the event loop.

        Helpers are `head` or `cat` of one file, no code of the model's: they skip the cgroup join
        (on cgroup v1 each join takes a kernel-wide lock, which concurrent prompts contend for).
        """
        argv = self._wrap(["/bin/sh", "-c", script, "hermes-runner", *args], chdir=self.cwd, join=False)
        cwd = None if self._b.confined else self.cwd
        loop = asyncio.get_running_loop()

        def go() -> tuple[int, bytes, str, bool]:
            return run_io(
                argv, env=self._env, cwd=cwd, stdin=data, max_out=max_out, timeout=IO_TIMEOUT_S, files=self._b.files
            )

        try:
            code, out, err, timed_out = await loop.run_in_executor(self._b.pool, go)
        except (FileNotFoundError, NotADirectoryError):  # unconfined: the command removed its work dir
            raise ToolError(f"the working directory {self.cwd} no longer exists") from None
        except OSError as exc:
            raise SandboxError(f"cannot start a sandboxed helper: {exc}") from exc
        if timed_out:
            raise ToolError(f"timed out after {IO_TIMEOUT_S:g}s (a FIFO or a device that never ends?)")
        return code, out, err

    def shared_dir(self) -> tuple[Path, str]:
        """A dir of this prompt seen by the runner and its commands: (its host path, its path in the sandbox)."""
        return self._tmpdir, "/tmp" if self._b.confined else str(self._tmpdir)

    def _resolve(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.cwd, path))

    async def read_file(self, path: str) -> bytes:
        code, out, err = await self._io(
            READ_SCRIPT, [self._resolve(path), str(MAX_READ_BYTES + 1)], None, MAX_READ_BYTES
        )
        check_read(path, code, err)
        if len(out) > MAX_READ_BYTES:
            raise ToolError(f"{path} is larger than {MAX_READ_BYTES} bytes; read it in the terminal instead")
        return out

    async def write_file(self, path: str, data: bytes) -> None:
        target = self._resolve(path)
        tmp = "/tmp" if self._b.confined else str(self._tmpdir)
        if not any(target == a or target.startswith(a.rstrip("/") + "/") for a in (self.cwd, tmp)):
            raise ToolError(f"writes are confined to the task directory {self.cwd} and /tmp: {path}")
        code, _, err = await self._io(WRITE_SCRIPT, [target], data, 0)
        check_write(path, code, err)
        if self._watch:
            grown = await asyncio.get_running_loop().run_in_executor(self._b.pool, self._grown)
            if grown > self._b.disk:
                raise ToolError(f"{path} was written, but {self._disk_message(grown)}")

    async def close(self) -> None:
        self._b.release(self)


class LocalBackend(Confinement):
    """Per-prompt directories on this host, confined by bubblewrap (or explicitly not)."""

    def __init__(self, cfg: SandboxConfig, run_name: str, run_dir: str = ""):  # (its dirs: under sandbox.local.root)
        super().__init__(cfg.local)
        o = self.options
        self.keep = cfg.keep
        self.max_output = cfg.max_output_chars
        if not 0 < o.uid_base < 2**32 - UIDS_PER_RUNNER * 100_000:
            raise ConfigError(f"sandbox.local.uid_base is out of range: {o.uid_base}")
        self.leftovers = 0  # prompts whose processes outlived them and had to be killed
        self._watchdog: local_watchdog.Watchdog | None = None  # unmounts the tmpfs mounts if the runner dies
        self._root = root = Path(o.root) if o.root else default_root()
        self._token = safe_name(run_name)
        self._dir = root / f"{self._token}-{os.getpid()}"
        self._uid_base = o.uid_base + (os.getpid() % 100_000) * UIDS_PER_RUNNER
        self._free_uids = _FREE_SLOTS  # shared by every backend of this process: a uid serves one prompt
        self._removals: set[asyncio.Future] = set()
        self._creating: set[asyncio.Future] = set()  # sandboxes being made, waited for by shutdown
        # Blocking work (forks, directory creation and removal) runs here, off the event loop.
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="local-sandbox")

    async def start(self, images: set[str]) -> dict[str, str]:
        await asyncio.to_thread(self._start)
        return {}

    def _start(self) -> None:
        self._root.mkdir(parents=True, exist_ok=True)
        self._dir.mkdir(mode=0o700, exist_ok=True)
        if self._dir.resolve().parent != self._root.resolve():
            raise ConfigError(f"the sandbox dir {self._dir} is not inside sandbox.local.root {self._root}")
        marker = {"pid": os.getpid(), "start": process_start(os.getpid()) or "", "host": socket.gethostname()}
        (self._dir / MARKER).write_text(json.dumps({**marker, "keep": self.keep}))
        if self.confined:
            self._set_up_confinement()
        self.describe()
        reap_orphans(self._root, self._dir)

    def _set_up_confinement(self) -> None:
        missing = self.missing_tools()
        if not missing:
            self.cgroups = Cgroups.open(f"{self._token}-{os.getpid()}-{next(_BACKENDS)}")
            self.bwrap_static = self._static_args()
            self.launch = LAUNCH.format(nodir=NO_WORKDIR, limits=self._rlimits())
            missing += self._probe()
        if missing:
            if self.cgroups:
                self.cgroups.close()
            if self._watchdog is not None:
                self._watchdog.stop()
            raise ConfigError(
                "the local sandbox cannot confine commands on this host: "
                + "; ".join(missing)
                + ". Fix that, use sandbox=docker, or set sandbox.local.isolation=none to run commands "
                "unconfined (explicit opt-out)."
            )

    def _probe(self) -> list[str]:
        """One sandboxed run at start: it must work, as a non-root uid with no capabilities."""
        probe_dir = Path(tempfile.mkdtemp(prefix="probe-", dir=self._dir))
        try:
            if self.disk and self.drop_uid:  # root: a tmpfs per prompt, if this host lets us mount one
                self._watchdog = local_watchdog.spawn(self._dir, self.keep)  # before any mount
                try:
                    mount_tmpfs(probe_dir, self.disk)
                    self.disk_tmpfs = True
                except OSError as exc:
                    log.info("%s: the disk limit is kept by a watchdog instead", exc)
                    self._watchdog.stop()
                    self._watchdog = None
            box = self._make(probe_dir, None, self._free_uids[-1])  # its cgroup is the slot's, kept
            argv = box._wrap(
                ["/bin/sh", "-c", "cat /proc/self/status; ls -d /run /var/run 2>&1; exit 0"], chdir=box.cwd
            )
            code, out, err, _ = run_io(
                argv, env=box._env, cwd=None, stdin=None, max_out=65536, timeout=30, files=self.files
            )
        finally:
            if left := remove_tree(probe_dir):
                log.error("cannot unmount %s: the probe's dir %s is left in place", left, probe_dir)
        return self.judge_probe(code, out.decode(errors="replace"), err)

    async def create(self, prompt: Prompt) -> LocalSandbox:
        made = asyncio.get_running_loop().run_in_executor(self.pool, self._create, prompt)
        self._creating.add(made)
        made.add_done_callback(self._creating.discard)
        try:
            return await asyncio.shield(made)  # its thread goes on if the prompt is cancelled
        except asyncio.CancelledError:
            made.add_done_callback(self._abandoned)
            raise

    def _abandoned(self, made: asyncio.Future) -> None:
        """A sandbox finished for a prompt cancelled meanwhile (Ctrl-C): released at once."""
        if not made.cancelled() and made.exception() is None:
            self.release(made.result())

    def _create(self, prompt: Prompt) -> LocalSandbox:
        if not self._free_uids:
            raise SandboxError(f"more than {UIDS_PER_RUNNER} local sandboxes at once")
        task = Path(tempfile.mkdtemp(prefix=f"{safe_name(prompt.key, 40)}-", dir=self._dir))
        cwd = None
        if prompt.cwd:
            cwd = Path(prompt.cwd)
            if not cwd.is_absolute() or not cwd.is_dir():
                os.rmdir(task)
                raise SandboxError(f"the row's cwd {prompt.cwd!r} is not a directory on this host (local sandbox)")
        slot = self._free_uids.pop()
        try:
            return self._make(task, cwd, slot)
        except OSError as exc:
            self._free_uids.append(slot)
            remove_tree(task)
            raise SandboxError(f"cannot set up a local sandbox: {exc}") from exc

    def _make(self, task: Path, cwd: Path | None, slot: int) -> LocalSandbox:
        uid = self._uid_base + slot if self.drop_uid else os.getuid()
        mounted = self.disk_tmpfs and not os.path.ismount(task)  # (the probe's is mounted already)
        if mounted:
            mount_tmpfs(task, self.disk)
        tmpdir = task / "tmp"
        tmpdir.mkdir(mode=0o700)
        workdir = cwd or task / "work"
        own = [tmpdir] if cwd else [tmpdir, workdir]
        if not cwd:
            workdir.mkdir(mode=0o700)
        if self.drop_uid:
            for d in own:
                os.chown(d, uid, uid)
        cg = self._slot_cgroup(slot) if self.cgroups else []
        watch = []
        if self.disk and not self.disk_tmpfs:
            watch.append((task, not self.drop_uid))  # its files are the runner's own: none may hide
        if self.disk and cwd:
            watch.append((cwd, False))  # a host dir: its growth counts
        return LocalSandbox(task, workdir, tmpdir, self, slot, uid, cg, self.disk_tmpfs, watch)

    def release(self, box: LocalSandbox) -> None:
        """A prompt ended: its dir and cgroup go in the background (its session need not wait for the disk)."""
        if box.released:
            return
        box.released = True

        def cleanup() -> None:
            self._end_processes(box)
            if box.mounted and self.keep:  # kept for debugging: copied out of the tmpfs first
                copy_out(box._taskdir)
            elif not self.keep and (left := remove_tree(box._taskdir)):
                log.error("cannot unmount %s: the prompt's dir %s is left in place", left, box._taskdir)

        task = asyncio.get_running_loop().run_in_executor(self.pool, cleanup)
        self._removals.add(task)
        task.add_done_callback(self._removals.discard)
        task.add_done_callback(lambda _: self._free_uids.append(box.slot))

    def _end_processes(self, box: LocalSandbox) -> None:
        """A prompt's processes must not outlive it: wait for its cgroup to empty, else kill what is left there
        and (root runner) everything of its uid, and log an error."""
        if not self.confined:
            return
        me = {os.getpid()}  # cgroup v1: the runner's thread that forks the slot's commands is in its cgroups
        deadline = time.monotonic() + LEFTOVER_WAIT_S
        while (left := procs_in(box._cgroup) - me) and time.monotonic() < deadline:
            time.sleep(0.02)  # a fork bomb's processes take a moment to die with their pid namespace
        if left:
            kill_procs(box._cgroup, me)
        by_uid = self.drop_uid and (left or not self.cgroups) and kill_uid(box._uid, LEFTOVER_WAIT_S)
        if left or by_uid:
            self.leftovers += 1
            log.error(
                "a prompt's processes outlived it (%s): killed by %s",
                f"{len(left)} in its cgroup" if left else f"uid {box._uid}",
                " and ".join(w for w, y in (("its cgroup", left), (f"uid {box._uid}", by_uid)) if y),
            )

    async def shutdown(self) -> None:
        while self._creating or self._removals:  # an abandoned sandbox's release adds a removal
            await asyncio.gather(*self._creating, *self._removals, return_exceptions=True)
        loop = asyncio.get_running_loop()
        for spawner in list(self._spawners.values()):  # its thread leaves the cgroups by ending
            await loop.run_in_executor(self.pool, functools.partial(spawner.shutdown, wait=True))
        if self.cgroups:
            await loop.run_in_executor(self.pool, self.cgroups.close)
        if not self.keep:
            left = await loop.run_in_executor(self.pool, remove_tree, self._dir)
            if left:
                log.error("cannot unmount %s: the run's sandbox dir %s is left in place", left, self._dir)
        if self._watchdog is not None:
            await loop.run_in_executor(self.pool, self._watchdog.stop)
        self.pool.shutdown(wait=False)
