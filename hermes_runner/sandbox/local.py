"""Local sandbox: a fresh directory per prompt, commands in their own process group.

With bubblewrap installed (the default `isolation: auto`), every command also runs
with the host filesystem read-only except the task's own directories, and with no
network, so a model's destructive commands cannot touch the host.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hermes_runner.config import SandboxConfig
from hermes_runner.dataset import Prompt
from hermes_runner.errors import ConfigError, SandboxError, ToolError
from hermes_runner.sandbox.base import SAFE_ENV_KEYS, ExecResult, pid_alive
from hermes_runner.sandbox.spawn import run_command

log = logging.getLogger(__name__)


def default_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hermes-runner" / "sandboxes"


class LocalSandbox:
    def __init__(self, taskdir: Path, workdir: Path, tmpdir: Path, backend: LocalBackend):
        self._taskdir = taskdir
        self._workdir = workdir
        self._tmpdir = tmpdir
        self._b = backend
        self.cwd = str(workdir)
        self._env = {**backend.env, "HOME": str(workdir), "TMPDIR": "/tmp" if backend.bwrap else str(tmpdir)}

    def _argv(self, command: str, wd: str) -> list[str]:
        shell = self._b.shell
        if not self._b.bwrap:
            return [shell, "-c", command]
        argv = [self._b.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        argv += ["--bind", str(self._tmpdir), "/tmp", "--bind", str(self._workdir), str(self._workdir)]
        argv += ["--unshare-all"] + (["--share-net"] if self._b.options.network else [])
        argv += ["--die-with-parent", "--new-session", "--chdir", wd, shell, "-c", command]
        return argv

    async def run(self, command: str, timeout: float, workdir: str | None = None) -> ExecResult:
        wd = str(self._resolve(workdir)) if workdir else self.cwd
        host_wd = self._host_path(wd)

        def check() -> None:
            if not os.path.isdir(host_wd):
                raise ToolError(f"workdir does not exist: {wd}")

        code, output, timed_out = await run_command(
            self._argv(command, wd),
            env=self._env,
            cwd=str(host_wd) if not self._b.bwrap else None,
            timeout=timeout,
            limit=self._b.max_output,
            executor=self._b.pool,
            check=check,
        )
        return ExecResult(code, output, timed_out)

    def _resolve(self, path: str) -> Path:
        p = Path(path)
        return p if p.is_absolute() else Path(self.cwd) / p

    def _host_path(self, path: str | Path) -> Path:
        """Map a path as the sandboxed command sees it to the host path."""
        p = Path(path)
        if p == self._workdir or self._workdir in p.parents:
            return p
        if self._b.bwrap and (p == Path("/tmp") or Path("/tmp") in p.parents):
            return self._tmpdir / p.relative_to("/tmp")
        return p

    async def read_file(self, path: str) -> bytes:
        host = self._host_path(self._resolve(path))
        try:
            return await asyncio.to_thread(host.read_bytes)
        except FileNotFoundError:
            raise ToolError(f"file not found: {path}") from None
        except IsADirectoryError:
            raise ToolError(f"is a directory: {path}") from None
        except PermissionError:
            raise ToolError(f"permission denied: {path}") from None

    async def write_file(self, path: str, data: bytes) -> None:
        host = self._host_path(self._resolve(path)).resolve()
        allowed = [self._workdir.resolve(), self._tmpdir.resolve()]
        if not any(host == a or a in host.parents for a in allowed):
            raise ToolError(f"writes are confined to the task directory {self.cwd} and /tmp: {path}")

        def write() -> None:
            host.parent.mkdir(parents=True, exist_ok=True)
            host.write_bytes(data)

        try:
            await asyncio.to_thread(write)
        except (IsADirectoryError, NotADirectoryError, PermissionError) as exc:
            raise ToolError(f"cannot write {path}: {exc.strerror or exc}") from None

    async def close(self) -> None:
        if self._b.keep:
            return
        # A row's own `cwd` is the user's directory: only our task dir is removed.
        self._b.remove_later(self._taskdir)


class LocalBackend:
    """Per-prompt directories on this host, optionally confined by bubblewrap."""

    def __init__(self, cfg: SandboxConfig, run_token: str):
        self.options = cfg.local
        self.keep = cfg.keep
        self.max_output = cfg.max_output_chars
        self.shell = shutil.which("bash") or "/bin/sh"
        self.env = {k: os.environ[k] for k in SAFE_ENV_KEYS if k in os.environ}  # the host env a command may see
        self.env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        self.env["TERM"] = "dumb"
        iso = self.options.isolation
        if iso not in ("auto", "bwrap", "none"):
            raise ConfigError(f"sandbox.local.isolation must be auto, bwrap or none, not {iso!r}")
        self.bwrap = shutil.which("bwrap") if iso in ("auto", "bwrap") else None
        if iso == "bwrap" and not self.bwrap:
            raise ConfigError("sandbox.local.isolation=bwrap but bubblewrap (bwrap) is not installed")
        root = Path(self.options.root) if self.options.root else default_root()
        self._root = root
        self._dir = root / f"{run_token}-{os.getpid()}"
        self._removals: set[asyncio.Future] = set()
        # Blocking work (forks, directory creation and removal) runs here, off the event loop.
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="local-sandbox")

    async def start(self, images: set[str]) -> dict[str, str]:
        if not self.bwrap:
            log.warning(
                "local sandbox without bubblewrap: commands run unconfined on this host "
                "(install bubblewrap, or use sandbox=docker)"
            )
        self._dir.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(self._reap_orphans)
        return {}

    def _reap_orphans(self) -> None:
        """Remove task dirs left by runners that were killed."""
        for d in self._root.iterdir():
            pid = d.name.rsplit("-", 1)[-1]
            if d != self._dir and pid.isdigit() and not pid_alive(int(pid)) and not self.keep:
                shutil.rmtree(d, ignore_errors=True)

    async def create(self, prompt: Prompt) -> LocalSandbox:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self._create, prompt)

    def _create(self, prompt: Prompt) -> LocalSandbox:
        task = tempfile.mkdtemp(prefix=f"{prompt.key}-", dir=self._dir)
        os.mkdir(f"{task}/tmp")
        taskdir, tmpdir = Path(task), Path(f"{task}/tmp")
        if prompt.cwd:
            workdir = Path(prompt.cwd)
            if not workdir.is_dir():
                shutil.rmtree(taskdir, ignore_errors=True)
                raise SandboxError(f"the row's cwd {prompt.cwd!r} is not a directory on this host (local sandbox)")
        else:
            os.mkdir(f"{task}/work")
            workdir = Path(f"{task}/work")
        return LocalSandbox(taskdir, workdir, tmpdir, self)

    def remove_later(self, taskdir: Path) -> None:
        """Remove a finished prompt's dir in the background: its session need not wait for the disk."""
        task = asyncio.get_running_loop().run_in_executor(self.pool, shutil.rmtree, taskdir, True)
        self._removals.add(task)
        task.add_done_callback(self._removals.discard)

    async def shutdown(self) -> None:
        if self._removals:
            await asyncio.gather(*self._removals, return_exceptions=True)
        if not self.keep:
            await asyncio.get_running_loop().run_in_executor(self.pool, shutil.rmtree, self._dir, True)
        self.pool.shutdown(wait=False)
