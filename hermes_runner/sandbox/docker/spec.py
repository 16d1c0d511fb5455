"""What a prompt's container looks like, from its image and the options alone: the Spec, the engine's HostConfig,
and what the options leave unbounded."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from docker.api import APIClient
from docker.types import LogConfig

from hermes_runner.config import DockerSandboxOptions, parse_size
from hermes_runner.sandbox.docker.images import Probe, choose_user

MIN_UIDS = 2048  # the smallest uid range of a container of its own (userns auto)


@dataclass(frozen=True)
class Spec:
    """What a prompt's container looks like; containers of equal specs are interchangeable."""

    image: str  # image id
    workdir: str
    user: str | None
    tmpfs: tuple[tuple[str, str], ...]  # (path, tmpfs options): the working dir, the image's VOLUMEs
    copies: tuple[str, ...] = ()  # tmpfs paths the image's content there is copied into after the start
    uids: int = 0  # the size of the container's own uid range (userns auto), if it gets one


def container_spec(
    image: dict, found: Probe, workdir: str, o: DockerSandboxOptions, owner: Callable[..., str], userns: str | None
) -> Spec:
    """The container of a prompt at `workdir` from the image (`attrs`): its user, a tmpfs of the size cap at the
    working dir and at each of the image's VOLUMEs (`owner(uid, gid)`: the mount options that give it to the user)."""
    config = image.get("Config") or {}
    user, uid, gid = choose_user(o.user, config.get("User") or "", found)
    owned = o.workdir_tmpfs + owner(uid, gid)
    taken = set(o.tmpfs) | {v.split(":")[1] for v in o.volumes if ":" in v}
    tmpfs: list[tuple[str, str]] = []
    copies: list[str] = []
    if workdir not in taken and (o.read_only or not found.workdir.populated):
        # writable, in a tmpfs of its size cap: with a copy of what the image has there
        tmpfs.append((workdir, owned))
        if found.workdir.populated:
            copies.append(workdir)
    for path in sorted(config.get("Volumes") or {}):  # an image's VOLUME would be an uncapped volume on disk
        path = posixpath.normpath(path)
        if path not in taken and path != workdir:
            tmpfs.append((path, owned))
            copies.append(path)
    uids = _uid_range(uid, gid) if userns else 0
    return Spec(image["Id"], workdir, user, tuple(tmpfs), tuple(copies), uids)


def host_config(
    api: APIClient, o: DockerSandboxOptions, spec: Spec, engine_tmpfs: dict[str, str], keep: bool, userns: str | None
) -> dict:
    """The engine's HostConfig of a prompt's container: its limits, mounts and security options."""
    config = api.create_host_config(
        network_mode=o.network_mode,
        mem_limit=o.mem_limit or None,
        memswap_limit=(o.memswap_limit or o.mem_limit) or None,
        nano_cpus=int(o.cpus * 1e9) if o.cpus > 0 else None,
        pids_limit=o.pids_limit if o.pids_limit > 0 else None,
        read_only=o.read_only,
        tmpfs={**engine_tmpfs, **o.tmpfs, **dict(spec.tmpfs)},
        binds=list(o.volumes) or None,
        cap_drop=list(o.cap_drop) or None,
        cap_add=list(o.cap_add) or None,
        security_opt=list(o.security_opt) or None,
        init=o.init,
        runtime=o.runtime,
        auto_remove=not keep,
        log_config=LogConfig(type="none"),  # what the container writes to its stdout never lands on disk
    )
    if userns:  # a uid range of its own: the commands' per-uid process limit is this container's alone
        config["UsernsMode"] = f"{userns}:size={spec.uids}"  # (docker-py only knows "host")
    return config


def unbounded(o: DockerSandboxOptions, no_cgroups: str, userns: str | None) -> list[str]:
    """What neither the engine (`no_cgroups`: why it sets no limits) nor the options bound, each with why."""
    out = []
    if no_cgroups and not userns:
        out.append(f"processes and memory ({no_cgroups})")
    if not o.mem_limit:
        out.append("memory (sandbox.docker.mem_limit is not set)")
    if not o.read_only:
        out.append("disk (sandbox.docker.read_only=false: the container's own layer grows on the host's disk)")
    for path, how in [*o.tmpfs.items(), ("the working dir", o.workdir_tmpfs)]:
        if not tmpfs_size(how):
            out.append(f"memory (the tmpfs at {path} has no size=: up to half the host's RAM)")
    for v in o.volumes:
        if "ro" not in (v.split(":")[2:3] or [""])[0].split(","):
            out.append(f"disk (sandbox.docker.volumes {v!r} is writable and has no size limit)")
    return out


def _uid_range(uid: int | None, gid: int | None) -> int:
    """Ids a container's own uid range needs for its user (65536 when the user's ids are unknown)."""
    if uid is None or gid is None:
        return 65536
    return max(MIN_UIDS, -(-(max(uid, gid) + 1) // 1024) * 1024)


def tmpfs_size(options: str) -> int:
    """The size= of tmpfs mount options, in bytes (0: none, or unreadable)."""
    for opt in options.split(","):
        if opt.strip().startswith("size="):
            try:
                return parse_size(opt.strip()[5:])
            except ValueError:
                return 0
    return 0
