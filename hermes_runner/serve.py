"""Serve a local model as a child process for the length of a run."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

from hermes_runner.config import ModelConfig
from hermes_runner.errors import ConfigError

log = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def resolve_model_path(spec: str) -> Path:
    """A plain path, or `pkg:<relpath>` looked up in site-packages without importing anything."""
    if not spec.startswith("pkg:"):
        path = Path(spec).expanduser()
    else:
        rel = spec[4:]
        roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *sys.path}
        path = next((Path(r) / rel for r in roots if r and (Path(r) / rel).is_file()), Path(rel))
    if not path.is_file():
        raise ConfigError(
            f"model file not found: {spec} (for the embedded model run `make setup-local`, "
            "or point model.serve.model_path at a GGUF file)"
        )
    return path


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the runner dies, even by kill -9 (Linux)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _tail(path: Path, n: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    return ""


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return 200 <= r.status < 300
    except Exception:
        return False


@contextlib.asynccontextmanager
async def serving(model: ModelConfig, log_dir: Path) -> AsyncIterator[str | None]:
    """Start the model's server if it has one; yield its base_url (None: use model.base_url)."""
    s = model.serve
    if not s.enabled:
        yield None
        return
    port = s.port or free_port(s.host)
    subs = {"port": str(port), "host": s.host, "python": sys.executable}
    if s.model_path:
        subs["model_path"] = str(resolve_model_path(s.model_path))
    try:
        argv = [part.format(**subs) for part in s.command]
    except KeyError as exc:
        raise ConfigError(f"model.serve.command uses an unknown placeholder {exc}") from None
    if not argv:
        raise ConfigError("model.serve.enabled=true needs model.serve.command")
    log_path = log_dir / "model_server.log"
    env = {**os.environ, **{k: str(v) for k, v in s.env.items()}}
    log.info("starting model server: %s", " ".join(argv))
    with log_path.open("ab") as out:
        try:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, preexec_fn=_die_with_parent, start_new_session=True,
            )
        except OSError as exc:
            raise ConfigError(f"cannot start the model server {argv[0]!r}: {exc}") from None
    try:
        base = f"http://{s.host}:{port}"
        health = base + s.health_path
        deadline = time.monotonic() + s.startup_timeout_s
        while not await asyncio.to_thread(_healthy, health):
            if proc.poll() is not None:
                raise ConfigError(
                    f"the model server exited with code {proc.returncode} before it was ready; "
                    f"last lines of {log_path}:\n{_tail(log_path)}"
                )
            if time.monotonic() > deadline:
                raise ConfigError(
                    f"the model server was not healthy at {health} after {s.startup_timeout_s:g}s; "
                    f"last lines of {log_path}:\n{_tail(log_path)}"
                )
            await asyncio.sleep(0.25)
        log.info("model server ready at %s (pid %d)", base, proc.pid)
        yield base + "/v1"
    finally:
        await asyncio.to_thread(_stop, proc)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
