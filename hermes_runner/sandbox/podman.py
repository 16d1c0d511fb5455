"""Podman sandbox: the Docker backend's containers, through Podman's Docker-compatible API.

Rootful (`/run/podman/podman.sock`) or rootless (a user's `$XDG_RUNTIME_DIR/podman/podman.sock`,
served by `podman system service`): no daemon of root is needed. Everything but the engine's
address and two option spellings is the Docker backend's code (sandbox/docker/): isolation
defaults, labels, the watchdog and the orphan sweep, the image check before any model call.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import docker

from hermes_runner.config import SandboxConfig
from hermes_runner.errors import ConfigError
from hermes_runner.sandbox.docker.backend import API_TIMEOUT_S, DockerBackend
from hermes_runner.sandbox.docker.spec import Spec

log = logging.getLogger(__name__)

ROOTFUL_SOCKET = "/run/podman/podman.sock"
USERNS = "auto"  # a uid range of the container's own, from the service user's subordinate ids
READ_ONLY_TMPFS = {"/run": "rw,nosuid,nodev,size=64m,mode=755", "/var/tmp": "rw,nosuid,nodev,size=64m,mode=1777"}
NATIVE_API = "v4.0.0"  # the libpod API prefix (Podman >= 4) used for what the Docker API does not say


def find_url(setting: str | None, env: dict[str, str] | None = None) -> str:
    """The Podman API address: the setting, else $CONTAINER_HOST, else the first existing socket."""
    env = os.environ if env is None else env
    if setting:
        url = setting
    elif env.get("CONTAINER_HOST"):
        url = env["CONTAINER_HOST"]
    else:
        candidates = [f"{env['XDG_RUNTIME_DIR']}/podman/podman.sock"] if env.get("XDG_RUNTIME_DIR") else []
        candidates.append(ROOTFUL_SOCKET)
        found = next((c for c in candidates if Path(c).is_socket()), None)
        if found is None:
            raise ConfigError(
                f"sandbox.backend=podman but no Podman socket was found (looked at {', '.join(candidates)}). "
                "Start `podman system service --time=0 unix://<path>` (scripts/ci_podman_setup.sh does it on "
                "Debian), or set sandbox.podman.url or CONTAINER_HOST."
            )
        url = f"unix://{found}"
    if not url.startswith(("unix://", "tcp://", "http://", "https://")):
        raise ConfigError(f"sandbox.podman.url must be unix:///path or tcp://host:port, not {url!r}")
    return url


class PodmanBackend(DockerBackend):
    """Creates one container per prompt on a Podman service (rootful or rootless)."""

    engine = "podman"

    def __init__(self, cfg: SandboxConfig, run_name: str, run_dir: str):
        super().__init__(cfg, run_name, run_dir)
        self.base_url = find_url(cfg.podman.url)
        self.rootless: bool | None = None  # known after start()

    def connect(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.base_url, timeout=API_TIMEOUT_S, max_pool_size=256)

    def unreachable(self, exc: Exception) -> ConfigError:
        return ConfigError(
            f"sandbox.backend=podman but no Podman service answers at {self.base_url}: {exc}. "
            "Start `podman system service --time=0` (scripts/ci_podman_setup.sh does it on Debian), "
            "or set sandbox.podman.url or CONTAINER_HOST."
        )

    def check_engine(self) -> None:
        """Rootless Podman on cgroup v1 sets no cgroup limits: each container then gets a uid range of its own
        (`--userns=auto`) and every command per-process rlimits (nproc, data) instead (`_create`); then
        `check_bounds`."""
        api = self.api
        info = api.get(f"{api.base_url}/{NATIVE_API}/libpod/info", timeout=API_TIMEOUT_S)
        info.raise_for_status()
        host = info.json().get("host") or {}
        self.rootless = bool((host.get("security") or {}).get("rootless"))
        if self.rootless and host.get("cgroupVersion") == "v1":
            self.no_cgroups = "rootless Podman on cgroup v1 sets no cgroup limits (v1 is not delegated to users)"
            self.userns = USERNS
            log.info(
                "rootless Podman on cgroup v1: no cgroup limits; each container gets a uid range of its own "
                "(--userns=%s), and every command at most sandbox.docker.pids_limit processes (RLIMIT_NPROC of that "
                "range) and mem_limit of data per process (RLIMIT_DATA); sandbox.docker.cpus is not enforced",
                USERNS,
            )
        self.check_bounds()

    def with_copies(self, spec: Spec) -> Spec:
        """Podman copies the image's content into a tmpfs itself (`tmpcopyup`)."""
        copied = set(spec.copies)
        tmpfs = tuple((p, how + ",tmpcopyup" if p in copied else how) for p, how in spec.tmpfs)
        return dataclasses.replace(spec, tmpfs=tmpfs, copies=())

    def engine_tmpfs(self) -> dict[str, str]:
        """Podman's own tmpfs mounts, of no size cap: /run and /var/tmp of a read-only container (--read-only-tmpfs);
        rootless on cgroup v1, a writable /sys/fs/cgroup (no cgroup of its own to show)."""
        out = dict(READ_ONLY_TMPFS) if self.opts.read_only else {}
        if self.userns:
            out["/sys/fs/cgroup"] = "ro,nosuid,nodev,noexec,size=64k,notmpcopyup"
        return out

    @staticmethod
    def tmpfs_owner(uid: int | None, gid: int | None) -> str:
        """Podman has no uid=/gid= tmpfs options; `U` gives the tmpfs to the container's user."""
        return ",U" if uid is not None or gid is not None else ""
