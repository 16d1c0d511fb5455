"""The sandbox section: where tool commands run, and each backend's options."""

from dataclasses import dataclass, field
from enum import Enum, StrEnum


class LocalIsolation(str, Enum):
    """How the local sandbox confines commands (docs/sandboxes.md)."""

    auto = "auto"  # the same as bwrap: confined, or the run refuses to start and says what is missing
    bwrap = "bwrap"  # bubblewrap + an unprivileged uid without capabilities + limits
    none = "none"  # explicit opt-out: commands run unconfined, as the runner's user


@dataclass
class LocalSandboxOptions:
    isolation: LocalIsolation = LocalIsolation.auto
    network: bool = False  # with bwrap: keep the host network
    root: str | None = None  # parent dir of per-task dirs (default: ~/.cache/hermes-runner/sandboxes)
    # read-only system paths a command sees (nothing else of the host but its own work dir and /tmp)
    system_paths: list[str] = field(
        default_factory=lambda: ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"]
    )
    uid_base: int = 1_900_000_000  # a root runner runs each prompt as its own uid from here (no passwd entry)
    pids_limit: int = 256  # processes and threads per prompt (0: none)
    mem_limit: str | None = "1g"  # memory per prompt, no swap (null: none); + disk_limit when its files are a tmpfs
    cpus: float = 1.0  # CPU cores per prompt (0: none; needs cgroups)
    # what a prompt's work dir and /tmp may hold together, and its largest file (null: no cap; docs/sandboxes.md)
    disk_limit: str | None = "1g"
    seccomp: bool = True  # deny keyrings, mounts, namespaces, ptrace, bpf, kernel modules... (EPERM)
    RULES = {"pids_limit": ">= 0", "cpus": ">= 0", "mem_limit": "size", "disk_limit": "size"}


class DockerExecMode(StrEnum):
    """How a Docker sandbox runs each tool call (docs/docker.md#how-tool-calls-reach-the-container)."""

    shell = "shell"  # one long-lived shell per container (one exec at start) runs every call
    exec = "exec"  # a `docker exec` per call (three engine round trips and a runc exec each)


@dataclass
class DockerSandboxOptions:
    """One container per prompt; every isolation default can be relaxed here."""

    network_mode: str = "none"  # none | bridge | host | a network name
    mem_limit: str | None = "1g"
    memswap_limit: str | None = None  # None: same as mem_limit (no swap)
    cpus: float = 1.0
    pids_limit: int = 256
    read_only: bool = True  # read-only root; the working dir and `tmpfs` paths stay writable
    tmpfs: dict[str, str] = field(default_factory=lambda: {"/tmp": "rw,exec,nosuid,nodev,size=512m,mode=1777"})
    workdir_tmpfs: str = "rw,exec,nosuid,nodev,size=1g"  # mount options of the working dir's tmpfs
    cap_drop: list[str] = field(default_factory=lambda: ["ALL"])
    cap_add: list[str] = field(default_factory=list)
    security_opt: list[str] = field(default_factory=lambda: ["no-new-privileges"])
    user: str | None = "auto"  # "auto": a non-root user when the image has one; None: the image's default
    init: bool = True
    runtime: str | None = None  # e.g. runsc (gVisor)
    volumes: list[str] = field(default_factory=list)  # "host:container[:ro]" binds: state that outlives a prompt
    env: dict[str, str] = field(default_factory=dict)  # the only variables set in the container
    pull: bool = False  # pull images missing locally
    pool_size: int = 2  # containers started ahead per (image, working dir); each serves one prompt
    max_lifetime_s: int = 86_400  # a container left behind by a killed runner exits after this long
    exec_mode: DockerExecMode = DockerExecMode.shell  # shell | exec: how each tool call reaches the container
    # The run refuses to start when the engine or these options leave a prompt's processes, memory or disk
    # unbounded (docs/docker.md#what-bounds-a-prompt): no mem_limit, read_only=false, a tmpfs without size=,
    # a writable bind in `volumes`, an engine without cgroup limits. true: run anyway, with a warning.
    allow_unbounded: bool = False
    RULES = {"cpus": "> 0", "pids_limit": ">= 1", "pool_size": ">= 0", "max_lifetime_s": ">= 1", "mem_limit": "size"}


@dataclass
class PodmanSandboxOptions:
    """Where the Podman API listens; the containers themselves follow `sandbox.docker` (same options)."""

    # unix:///path/podman.sock or tcp://host:port; None: $CONTAINER_HOST, else $XDG_RUNTIME_DIR/podman/podman.sock,
    # else /run/podman/podman.sock (the first socket that exists)
    url: str | None = None


class SandboxKind(StrEnum):
    """Where tool commands run (sandbox/: one module per backend)."""

    local = "local"  # bubblewrap on this machine (sandbox/local/)
    docker = "docker"  # one container per prompt (sandbox/docker/)
    podman = "podman"  # the same containers on Podman, rootful or rootless (sandbox/podman.py)


@dataclass
class SandboxConfig:
    backend: str = "local"  # local | docker | podman, or a backend of yours: "package.module:Class"
    image: str | None = None  # default image (docker, podman)
    workdir: str = "/workspace"  # default working dir inside a container
    keep: bool = False  # keep the per-task sandbox after the prompt ends (debugging)
    command_timeout_s: float = 180.0  # default terminal timeout
    max_output_chars: int = 50_000  # terminal output kept (40% head, 60% tail)
    local: LocalSandboxOptions = field(default_factory=LocalSandboxOptions)
    docker: DockerSandboxOptions = field(default_factory=DockerSandboxOptions)  # containers (docker and podman)
    podman: PodmanSandboxOptions = field(default_factory=PodmanSandboxOptions)
    RULES = {"backend": SandboxKind, "command_timeout_s": "> 0", "max_output_chars": ">= 1"}
