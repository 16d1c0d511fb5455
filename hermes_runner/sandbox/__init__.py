"""Where tool commands run: sandbox backends (local bubblewrap, Docker, Podman), one module each, behind the Protocols
in `base`; the factory is here. It may import only vocabulary: config, errors, dataset, util."""

from __future__ import annotations

from hermes_runner.config import SandboxConfig, SandboxKind
from hermes_runner.errors import ConfigError
from hermes_runner.sandbox.base import ExecResult, Sandbox, SandboxBackend

__all__ = ["ExecResult", "Sandbox", "SandboxBackend", "make_backend"]


def make_backend(cfg: SandboxConfig, run_name: str, run_dir: str) -> SandboxBackend:
    if cfg.backend == SandboxKind.local:
        from hermes_runner.sandbox.local import LocalBackend

        return LocalBackend(cfg, run_name)
    if cfg.backend == SandboxKind.docker:
        from hermes_runner.sandbox.docker import DockerBackend

        return DockerBackend(cfg, run_name, run_dir)
    if cfg.backend == SandboxKind.podman:
        from hermes_runner.sandbox.podman import PodmanBackend

        return PodmanBackend(cfg, run_name, run_dir)
    raise ConfigError(f"unknown sandbox.backend {cfg.backend!r} ({', '.join(SandboxKind)})")
