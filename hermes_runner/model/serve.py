"""Serve a local model as a child process for the length of a run.

The server runs under `serve_guard.py`, which stops it (and anything it started) when the run
ends, is interrupted, crashes or is killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import logging
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

from hermes_runner.config import SERVED, ModelConfig
from hermes_runner.errors import ConfigError

log = logging.getLogger(__name__)

GUARD = Path(__file__).with_name("serve_guard.py")
LOG_NAME = "model_server.log"
# Loopback health checks must not go through an HTTP proxy from the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


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


def serves_file(model: ModelConfig) -> bool:
    """Whether the model's server serves a weights file named by model.serve.model_path (llama.cpp)."""
    s = model.serve
    return s.enabled and bool(s.model_path) and any("{model_path}" in part for part in s.command)


def served_model_name(model: ModelConfig) -> str:
    """The name a served model answers to and is recorded under: a served file's name without its
    suffix (`SmolLM2-135M-Instruct.Q4_1`), else model.name (the model a server such as vLLM loads)."""
    return resolve_model_path(model.serve.model_path).stem if serves_file(model) else model.name


def check_model(model: ModelConfig) -> None:
    """Refuse model options that a config serving its own model would ignore; name a served file's model.

    A config with model.serve.enabled starts its own server (model.base_url is `served`): a URL given
    there would be ignored, so it is refused with the config group to use instead. A served weights
    file names the model: any other model.name would label the data with a model that never wrote it.
    Sets model.name to the served model's name, which every trajectory's metadata.model then records.
    """
    s = model.serve
    if not s.enabled:
        if model.base_url == SERVED:
            raise ConfigError(
                "model.base_url=served but this model config starts no server (model.serve.enabled=false): "
                "set model.base_url=<the URL of your server>, or model.serve.enabled=true"
            )
        if model.name == SERVED:
            raise ConfigError(
                f"model.name=served names the model of a served file, but nothing is served here: set "
                f"model.name=<the model id {model.base_url} expects>"
            )
        return
    if model.base_url != SERVED:
        raise ConfigError(
            f"model.base_url={model.base_url} conflicts with a model config that serves its own model "
            "(model.serve.enabled=true; it would start its server and ignore the URL). To call the server "
            f"at that URL, choose the group for it: model=local_server model.base_url={model.base_url} "
            "model.name=<the model it serves>. To start this config's server, model.base_url must be `served`."
        )
    if serves_file(model):
        name = served_model_name(model)
        if model.name not in (SERVED, name):
            raise ConfigError(
                f"model.name={model.name} conflicts with this model config, which serves the file "
                f"{resolve_model_path(s.model_path)}: the model is called {name} (its file name) in the "
                "requests and in every trajectory. Leave model.name unset (pick another file with "
                f"model.serve.model_path=...), or, to call a model named {model.name} on a server you run, "
                f"use model=local_server model.base_url=<its URL> model.name={model.name}"
            )
        model.name = name


def server_argv(model: ModelConfig, port: int) -> list[str]:
    """The server command with its placeholders filled in."""
    s = model.serve
    if not s.command:
        raise ConfigError("model.serve.enabled=true needs model.serve.command")
    subs = {"port": str(port), "host": s.host, "python": sys.executable, "name": served_model_name(model)}
    if s.model_path:
        subs["model_path"] = str(resolve_model_path(s.model_path))
    try:
        argv = [part.format(**subs) for part in s.command]
    except KeyError as exc:
        name = exc.args[0]
        hint = " (set model.serve.model_path)" if name == "model_path" else ""
        raise ConfigError(f"model.serve.command uses the placeholder {{{name}}}, which has no value{hint}") from None
    # Also look beside this interpreter: a server installed in the same venv (vllm, ...) is found
    # when the runner is started as .venv/bin/python without activating the venv.
    search = os.pathsep.join([os.environ.get("PATH", os.defpath), str(Path(sys.executable).parent)])
    exe = shutil.which(argv[0], path=search)
    if exe is None:
        raise ConfigError(f"model server command not found: {argv[0]!r} (is it installed and on PATH?)")
    return [exe, *argv[1:]]


def _tail(path: Path, start: int, n: int = 30) -> str:
    """The last `n` lines written to `path` from byte `start` on (read from its last 64 KiB)."""
    with contextlib.suppress(OSError), path.open("rb") as f:
        f.seek(max(start, f.seek(0, os.SEEK_END) - 65536))
        return "\n".join(f.read().decode(errors="replace").splitlines()[-n:])
    return ""


def _healthy(url: str) -> bool:
    try:
        with _DIRECT.open(url, timeout=2) as r:
            return 200 <= r.status < 300
    except (OSError, http.client.HTTPException):
        return False


@contextlib.asynccontextmanager
async def serving(model: ModelConfig, log_dir: Path) -> AsyncIterator[str | None]:
    """Start the model's server if it has one; yield its base_url (None: use model.base_url)."""
    s = model.serve
    if not s.enabled:
        yield None
        return
    port = s.port or free_port(s.host)
    argv = server_argv(model, port)
    log_path = Path(log_dir) / LOG_NAME
    env = {**os.environ, **{k: str(v) for k, v in s.env.items()}}
    log.info("starting model server (log: %s): %s", log_path, " ".join(argv))
    with log_path.open("ab") as out:
        start = out.tell()
        out.write(f"==== {datetime.now().isoformat(timespec='seconds')} {' '.join(argv)}\n".encode())
        out.flush()
        guard = subprocess.Popen(  # noqa: ASYNC220 (fork+exec: does not block the loop noticeably)
            [sys.executable, "-P", str(GUARD), "--stop-timeout", str(s.stop_timeout_s), "--", *argv],
            stdin=subprocess.PIPE,  # the guard's lifeline: it stops the server when this closes
            stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,  # Ctrl-C reaches the runner only; the runner stops the server
        )  # fmt: skip
    watcher: asyncio.Task | None = None
    try:
        base = f"http://{s.host}:{port}"
        await _wait_healthy(guard, base + s.health_path, s.startup_timeout_s, log_path, start)
        log.info("model server ready at %s (guard pid %d)", base, guard.pid)
        watcher = asyncio.ensure_future(_watch(guard, log_path, start))
        yield base + "/v1"
    finally:
        if watcher:
            watcher.cancel()
        await asyncio.to_thread(_stop, guard, s.stop_timeout_s)


async def _wait_healthy(guard: subprocess.Popen, url: str, timeout: float, log_path: Path, start: int) -> None:
    started = time.monotonic()
    while not await asyncio.to_thread(_healthy, url):
        if guard.poll() is not None:
            raise ConfigError(
                f"the model server exited with code {guard.returncode} before it was ready; "
                f"last lines of {log_path}:\n{_tail(log_path, start)}"
            )
        if time.monotonic() - started > timeout:
            raise ConfigError(
                f"the model server was not healthy at {url} after {timeout:g}s "
                f"(model.serve.startup_timeout_s); last lines of {log_path}:\n{_tail(log_path, start)}"
            )
        await asyncio.sleep(0.25)
    log.debug("model server healthy after %.1fs", time.monotonic() - started)


async def _watch(guard: subprocess.Popen, log_path: Path, start: int) -> None:
    """Say loudly, once, if the server dies during the run (its prompts then fail and a rerun retries them)."""
    while guard.poll() is None:
        await asyncio.sleep(0.5)
    log.error(
        "the model server exited with code %s during the run; last lines of %s:\n%s",
        guard.returncode, log_path, _tail(log_path, start),
    )  # fmt: skip


def _stop(guard: subprocess.Popen, timeout: float) -> None:
    """Close the guard's lifeline (it stops the server) and wait; kill the guard if it hangs."""
    with contextlib.suppress(OSError):
        guard.stdin.close()
    try:
        guard.wait(timeout + 10)
    except subprocess.TimeoutExpired:
        guard.kill()  # the server gets SIGKILL with it (PR_SET_PDEATHSIG)
        guard.wait()
