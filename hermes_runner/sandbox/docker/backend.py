"""Docker sandbox: one fresh, locked-down container per prompt, removed when the prompt ends.

The docker SDK blocks, so every call runs in a thread of this backend's own pools: `_ctl` for
short API calls, `_io` for command streams (a long command must never starve a kill or a
removal). Containers carry labels naming their run and runner. A killed runner's containers go
three ways: a watchdog process beside the runner removes them when the runner dies (kill -9);
any later runner on this host removes those of dead runners at its start; and a container exits
on its own after `max_lifetime_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import posixpath
import re
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
from docker.errors import DockerException, NotFound
from docker.models.images import Image

from hermes_runner.config import DockerExecMode, DockerSandboxOptions, SandboxConfig, parse_size
from hermes_runner.dataset import Prompt
from hermes_runner.errors import ConfigError, SandboxError
from hermes_runner.sandbox.base import ExecResult, OutputCap
from hermes_runner.sandbox.docker import exec, orphans, watchdog
from hermes_runner.sandbox.docker.images import Probe, find_image, probe
from hermes_runner.sandbox.docker.pool import WarmPool
from hermes_runner.sandbox.docker.shell import DIED, Shell, ShellDied, usable_path
from hermes_runner.sandbox.docker.spec import Spec, container_spec, host_config, tmpfs_size, unbounded

log = logging.getLogger(__name__)

API_TIMEOUT_S = 120
KILL_GRACE_S = 10.0  # after a timeout: how long the killed command's output may take to end
MAX_READ_BYTES = 64 * 1024 * 1024
BOUNDS_DOC = "docs/docker.md#what-bounds-a-prompt"


class DockerSandbox:
    """One prompt's container; in `exec_mode: shell` its calls go through a long-lived shell."""

    def __init__(self, backend: DockerBackend, cid: str, workdir: str):
        self._b = backend
        self.id = cid
        self.cwd = workdir
        self._closed = False
        self._shell: asyncio.Future[Shell] | None = None
        if backend.opts.exec_mode is DockerExecMode.shell:
            self._shell = backend.call(Shell, backend.api, cid, io=True)  # ahead of the first call

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.cwd, path))

    async def _take_shell(self, path: str) -> Shell | None:
        """The shell, locked for one call; None: use a per-call exec (exec mode, busy, or no shell)."""
        if self._shell is None or self._closed or not usable_path(path):
            return None
        if self._shell.done() and (self._shell.exception() is not None or self._shell.result().dead):
            self._shell = self._b.call(Shell, self._b.api, self.id, io=True)  # it ended: a new one
        try:
            shell = await asyncio.shield(self._shell)
        except (DockerException, ShellDied, OSError, ValueError) as exc:
            log.debug("container %s: no shell (%s), per-call exec", self.id[:12], exc)
            return None
        if shell.dead or not shell.lock.acquire(blocking=False):
            return None
        return shell

    def _via_shell(self, shell: Shell, fn: Callable[..., Any], *args: Any) -> asyncio.Future:
        """Start `fn(*args)` on the locked shell in a thread; the lock is released when it ends."""

        def go() -> Any:
            try:
                return fn(*args)
            finally:
                shell.lock.release()

        return self._b.call(go, io=True)

    async def run(self, command: str, timeout: float, workdir: str | None = None) -> ExecResult:
        return await self._run(command, timeout, self._path(workdir) if workdir else self.cwd, True)

    async def _run(self, command: str, timeout: float, wd: str, use_shell: bool) -> ExecResult:
        cap = OutputCap(self._b.max_output)
        pids: list[int] = []
        api = self._b.api
        shell = await self._take_shell(wd) if use_shell else None
        if shell is None:
            fut = self._b.call(exec.run_command, api, self.id, command, wd, {}, cap, pids.append, io=True)
        else:
            fut = self._via_shell(shell, shell.run, command, wd, cap, pids.append)
        try:
            code = await asyncio.wait_for(asyncio.shield(fut), timeout)
            return ExecResult(code, cap.text())
        except TimeoutError:
            pass
        except ShellDied as exc:
            if not exc.started:  # the command never ran: run it once through an exec
                return await self._run(command, timeout, wd, False)
            code = await self._b.call(shell.exit_code)
            return ExecResult(code, cap.text() + DIED.format(code=code))
        except DockerException as exc:
            raise self._b.gone(self.id, exc) from exc
        except asyncio.CancelledError:  # the prompt ends (Ctrl-C, its time limit): the command goes too
            fut.add_done_callback(_quiet)
            if pids:
                self._b.spawn(exec.kill_tree, api, self.id, pids[0])
            raise
        # Timed out: kill the command's whole process tree inside the container.
        if pids:
            with contextlib.suppress(DockerException):
                await self._b.call(exec.kill_tree, api, self.id, pids[0])
        with contextlib.suppress(TimeoutError, DockerException, ShellDied):
            await asyncio.wait_for(asyncio.shield(fut), KILL_GRACE_S)
        if shell is not None and not fut.done():  # the shell did not come back: replace it
            fut.add_done_callback(_quiet)
            shell.close()
        return ExecResult(124, cap.text(), timed_out=True)

    async def _file_op(self, path: str, shell_op: str, exec_op: Callable[..., Any], *args: Any) -> Any:
        """A file op through the shell (again through an exec if the shell ended) or an exec."""
        shell = await self._take_shell(path)
        try:
            if shell is not None:
                try:
                    # shielded: a cancelled caller leaves the thread to finish the call, so the shell stays in step
                    return await asyncio.shield(self._via_shell(shell, getattr(shell, shell_op), path, *args))
                except ShellDied:
                    pass  # reads and writes can be repeated
            return await self._b.call(exec_op, self._b.api, self.id, path, *args, io=True)
        except DockerException as exc:
            raise self._b.gone(self.id, exc) from exc

    async def read_file(self, path: str) -> bytes:
        return await self._file_op(self._path(path), "read_file", exec.read_file, MAX_READ_BYTES)

    async def write_file(self, path: str, data: bytes) -> None:
        await self._file_op(self._path(path), "write_file", exec.write_file, data)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._shell is not None:
            self._shell.add_done_callback(_close_shell)
        if self._b.keep:
            log.info("sandbox.keep: container %s left running", self.id[:12])
            return
        await self._b.release(self.id)


def _quiet(fut: asyncio.Future) -> None:
    """Retrieve the outcome of a call nobody awaits any more."""
    if not fut.cancelled():
        fut.exception()


def _close_shell(fut: asyncio.Future) -> None:
    if not fut.cancelled() and fut.exception() is None:
        fut.result().close()


class DockerEngine:
    """What one engine with the Docker API is like: how to reach it, what it bounds, its tmpfs options.

    These are the hooks another engine (sandbox/podman.py) overrides: `connect`, `unreachable`, `check_engine`,
    `tmpfs_owner`, `engine_tmpfs`, `with_copies`.
    """

    engine = "docker"  # the sandbox.backend value, in messages
    base_url: str | None = None  # the engine's API address (None: DOCKER_HOST or the local socket)

    def __init__(self, opts: DockerSandboxOptions):
        self.opts = opts
        self.client: docker.DockerClient | None = None
        self.no_cgroups = ""  # why the engine sets no cgroup limits ("": it does); known after start()
        self.userns: str | None = None  # the UsernsMode giving each container a uid range of its own, if needed

    @property
    def api(self) -> docker.APIClient:
        assert self.client is not None, "DockerBackend.start() was not called"
        return self.client.api

    def connect(self) -> docker.DockerClient:
        """A client of the engine (blocking)."""
        return docker.from_env(timeout=API_TIMEOUT_S, max_pool_size=256)

    def unreachable(self, exc: Exception) -> ConfigError:
        return ConfigError(
            f"sandbox.backend=docker but the Docker engine is not reachable: {exc}. "
            "Start dockerd (scripts/ci_docker_setup.sh does it on Debian) or set DOCKER_HOST."
        )

    def check_engine(self) -> None:
        """Learn whether the engine sets cgroup limits (blocking); then `check_bounds`."""
        info = self.client.info()
        missing = [k for k in ("MemoryLimit", "PidsLimit") if info.get(k) is False]
        if missing:
            self.no_cgroups = f"the engine reports no {' and no '.join(missing)} support (docker info)"
        self.check_bounds()

    def check_bounds(self) -> None:
        """Refuse (ConfigError) a run whose prompts' processes, memory or disk nothing bounds, unless allowed."""
        problems = self.unbounded()
        if not problems:
            return
        text = f"sandbox.backend={self.engine} cannot bound each prompt's {'; '.join(problems)}"
        if self.opts.allow_unbounded:
            log.warning("%s (sandbox.docker.allow_unbounded=true: running anyway)", text)
            return
        raise ConfigError(f"{text}. Set sandbox.docker.allow_unbounded=true to run anyway ({BOUNDS_DOC}).")

    def unbounded(self) -> list[str]:
        """What neither the engine nor the options bound, each with why (empty: everything is bounded)."""
        return unbounded(self.opts, self.no_cgroups, self.userns)

    @staticmethod
    def tmpfs_owner(uid: int | None, gid: int | None) -> str:
        """Mount options that give a tmpfs to the container's user."""
        return "".join(f",{k}={v}" for k, v in (("uid", uid), ("gid", gid)) if v is not None)

    def engine_tmpfs(self) -> dict[str, str]:
        """The engine's own writable mounts of a read-only container, given a size cap here."""
        return {}

    def with_copies(self, spec: Spec) -> Spec:
        """How the image's content gets into the tmpfs of `spec.copies`: unpacked after the start (Docker has no
        tmpfs copy-up; the archive API still reads the image's files under the tmpfs)."""
        return spec


class DockerBackend(DockerEngine):
    """Creates one container per prompt on a Docker engine (DOCKER_HOST or the local socket)."""

    def __init__(self, cfg: SandboxConfig, run_name: str, run_dir: str):
        o = cfg.docker
        if not posixpath.isabs(cfg.workdir):
            raise ConfigError(f"sandbox.workdir must be an absolute path, not {cfg.workdir!r}")
        super().__init__(o)
        self.cfg = cfg
        self.keep = cfg.keep
        self.max_output = cfg.max_output_chars
        self.run_name = run_name
        self.run_dir = str(Path(run_dir).resolve())
        self.labels = orphans.runner_labels(run_name, self.run_dir)
        self._ctl = ThreadPoolExecutor(32, thread_name_prefix="docker-ctl")
        self._io = ThreadPoolExecutor(1024, thread_name_prefix="docker-io")
        self._images: dict[str, asyncio.Future[Image]] = {}
        self._probes: dict[tuple[str, str], asyncio.Future[Probe]] = {}
        self.pool = WarmPool(o.pool_size, self.launch, self.discard, o.max_lifetime_s / 2)
        self._live: set[str] = set()
        self._removals: set[asyncio.Future] = set()
        self._lock = threading.Lock()
        self._closing = False
        self._watchdog: watchdog.Watchdog | None = None

    def call(self, fn: Callable[..., Any], *args: Any, io: bool = False) -> asyncio.Future:
        """Run a blocking docker call in one of our thread pools."""
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._io if io else self._ctl, functools.partial(fn, *args))

    def spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        """Fire and forget a docker call (best effort)."""

        def done(f: asyncio.Future) -> None:
            if not f.cancelled() and f.exception() is not None:
                log.debug("background docker call %s failed: %s", fn.__name__, f.exception())

        self.call(fn, *args).add_done_callback(done)

    async def start(self, images: set[str]) -> dict[str, str]:
        try:
            self.client = await self.call(self.connect)
            await self.call(self.client.ping)
        except DockerException as exc:
            raise self.unreachable(exc) from None
        await self.call(self.check_engine)
        await self.call(orphans.reap, self.api)
        self._watchdog = await self.call(watchdog.spawn, self.labels, self.base_url)
        refs = sorted(images)
        results = await asyncio.gather(*(self._image(ref) for ref in refs), return_exceptions=True)
        return {ref: str(res) for ref, res in zip(refs, results, strict=False) if isinstance(res, BaseException)}

    async def shutdown(self) -> None:
        self._closing = True
        if self.client is not None:
            await self.pool.close()
            await asyncio.gather(*list(self._removals), return_exceptions=True)
            with self._lock:
                live = list(self._live) if not self.keep else []
            await asyncio.gather(*(self.discard(cid) for cid in live), return_exceptions=True)
            with contextlib.suppress(DockerException):
                await self.call(orphans.sweep, self.api, self.labels)
            await self.call(self.client.close)
        if self._watchdog is not None:
            await asyncio.to_thread(self._watchdog.stop)
        self._ctl.shutdown(wait=False, cancel_futures=True)
        self._io.shutdown(wait=False, cancel_futures=True)

    def _image(self, ref: str) -> asyncio.Future[Image]:
        """Find (or pull) each image once; the first caller starts it, the others share the result."""
        if ref not in self._images:
            self._images[ref] = self.call(find_image, self.client, ref, self.opts.pull)
        return self._images[ref]

    def _probe(self, image_id: str, workdir: str) -> asyncio.Future[Probe]:
        """One trial run per (image, working dir): the image's users and what it has at the working dir."""
        key = (image_id, workdir)
        if key not in self._probes:
            self._probes[key] = self.call(probe, self.client, image_id, workdir, self._labels("probe"))
        return self._probes[key]

    def _labels(self, key: str) -> dict[str, str]:
        return {**self.labels, orphans.PROMPT_KEY: key, orphans.KEEP: "1" if self.keep else "0"}

    async def _spec(self, prompt: Prompt) -> Spec:
        ref = prompt.image or self.cfg.image
        if not ref:
            raise SandboxError("no image for this prompt: set sandbox.image or the row's `image` / `docker_image`")
        workdir = prompt.cwd or self.cfg.workdir
        if not posixpath.isabs(workdir):
            raise SandboxError(f"cwd must be an absolute path inside the container, not {workdir!r}")
        workdir = posixpath.normpath(workdir)
        try:
            image = await self._image(ref)
            found = await self._probe(image.id, workdir)
        except SandboxError as exc:
            raise SandboxError(f"image {ref!r} is not available: {exc}") from None
        return self.with_copies(container_spec(image.attrs, found, workdir, self.opts, self.tmpfs_owner, self.userns))

    def _create(self, spec: Spec, key: str) -> str:
        """Create and start a container (blocking); it is registered before anything can fail."""
        o, api = self.opts, self.api
        cid = api.create_container(
            spec.image, command=[str(o.max_lifetime_s)], entrypoint=["sleep"], user=spec.user,
            working_dir=spec.workdir, environment={"HOME": "/tmp", "TERM": "dumb", **o.env}, labels=self._labels(key),
            name=self._name(key), host_config=host_config(api, o, spec, self.engine_tmpfs(), self.keep, self.userns),
        )["Id"]  # fmt: skip
        if self.userns:  # no cgroup limits: rlimits on every command the model runs (exec.set_limits)
            exec.set_limits(cid, o.pids_limit, parse_size(o.mem_limit))
        with self._lock:
            self._live.add(cid)
            closing = self._closing
        if closing:
            self.remove(cid)
            raise SandboxError("the run is shutting down")
        try:
            api.start(cid)
        except DockerException as exc:
            self.remove(cid)
            raise SandboxError(f"container failed to start: {_explain(exc)}") from None
        try:
            for path in spec.copies:
                exec.copy_in(api, cid, path, tmpfs_size(dict(spec.tmpfs)[path]))
        except BaseException:
            self.remove(cid)
            raise
        return cid

    def _name(self, key: str) -> str:
        return f"hermes-{_slug(self.run_name)}-{_slug(key)[:12] or 'ready'}-{secrets.token_hex(3)}"

    def remove(self, cid: str) -> None:
        """Remove a container (blocking); ContainerNotRemoved when it cannot be (its processes are killed)."""
        try:
            orphans.remove(self.api, cid)
        finally:
            exec.forget(cid)
            with self._lock:
                self._live.discard(cid)

    def gone(self, cid: str, exc: DockerException) -> SandboxError:
        """The error for a container that stopped working under a prompt."""
        if isinstance(exc, NotFound):
            return SandboxError(f"container {cid[:12]} vanished (removed, or it exited): {_explain(exc)}")
        return SandboxError(f"docker error in container {cid[:12]}: {_explain(exc)}")

    async def create(self, prompt: Prompt) -> DockerSandbox:
        if self._closing:
            raise SandboxError("the run is shutting down")
        spec = await self._spec(prompt)
        cid = self.pool.take(spec)
        if cid is None:
            cid = await self.launch(spec, prompt.key)
        else:  # a pre-started container: its name (not its labels) then tells the prompt
            self.spawn(self.api.rename, cid, self._name(prompt.key))
        return DockerSandbox(self, cid, spec.workdir)

    async def launch(self, spec: Spec, key: str = "") -> str:
        try:
            return await self.call(self._create, spec, key)
        except DockerException as exc:
            raise SandboxError(f"cannot create a container from {spec.image[:19]}: {_explain(exc)}") from None

    async def discard(self, cid: str) -> None:
        await self.call(self.remove, cid)

    async def release(self, cid: str) -> None:
        """Remove a prompt's container; the prompt waits, and fails (ContainerNotRemoved) if it cannot be removed.

        Shielded: a cancelled prompt (Ctrl-C, its time limit) still leaves the removal to finish."""
        fut = self.call(self.remove, cid)
        self._removals.add(fut)
        fut.add_done_callback(self._removals.discard)
        fut.add_done_callback(_quiet)  # (its error is logged where it happens, also when nobody awaits it)
        await asyncio.shield(fut)


def _slug(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]+", "-", text).strip("-.")[:40]


def _explain(exc: DockerException) -> str:
    return str(getattr(exc, "explanation", None) or exc)
