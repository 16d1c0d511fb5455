"""Where tool commands run: sandbox backends behind the Protocols in `base`, one package per family (`local/`:
bubblewrap, `docker/`: containers) and `podman` (the Docker backend on Podman); the factory is here.
It may import only vocabulary: config, errors, dataset, util."""

from __future__ import annotations

from hermes_runner.config import SandboxConfig, SandboxKind
from hermes_runner.sandbox.base import ExecResult, Sandbox, SandboxBackend
from hermes_runner.util.plugins import load

__all__ = ["BACKENDS", "ExecResult", "Sandbox", "SandboxBackend", "make_backend"]

# sandbox.backend -> its class, called as Class(cfg: SandboxConfig, run_name, run_dir); a user's by its import path
BACKENDS = {
    SandboxKind.local: "hermes_runner.sandbox.local.backend:LocalBackend",
    SandboxKind.docker: "hermes_runner.sandbox.docker.backend:DockerBackend",
    SandboxKind.podman: "hermes_runner.sandbox.podman:PodmanBackend",
}


def make_backend(cfg: SandboxConfig, run_name: str, run_dir: str) -> SandboxBackend:
    return load(cfg.backend, BACKENDS, "sandbox.backend")(cfg, run_name, run_dir)
