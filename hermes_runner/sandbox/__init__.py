"""Where tool commands run: sandbox backends behind the Protocols in `base`, one package per family (`local/`:
bubblewrap, `docker/`: containers) and `podman` (the Docker backend on Podman); the factory is here.
It may import only vocabulary: config, errors, dataset, util."""

from __future__ import annotations

from hermes_runner.config import SandboxConfig, SandboxKind
from hermes_runner.errors import ConfigError
from hermes_runner.sandbox.base import ExecResult, Sandbox, SandboxBackend

__all__ = ["ExecResult", "Sandbox", "SandboxBackend", "make_backend"]


def make_backend(cfg: SandboxConfig, run_name: str, run_dir: str) -> SandboxBackend:
    if cfg.backend == SandboxKind.local:
        from hermes_runner.sandbox.local.backend import LocalBackend

        return LocalBackend(cfg, run_name)
    if cfg.backend == SandboxKind.docker:
        from hermes_runner.sandbox.docker.backend import DockerBackend

        return DockerBackend(cfg, run_name, run_dir)
    if cfg.backend == SandboxKind.podman:
        from hermes_runner.sandbox.podman import PodmanBackend

        return PodmanBackend(cfg, run_name, run_dir)
    raise ConfigError(f"unknown sandbox.backend {cfg.backend!r} ({', '.join(SandboxKind)})")
