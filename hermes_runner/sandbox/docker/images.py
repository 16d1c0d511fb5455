"""Images for the Docker sandbox: find or pull them, look inside once, pick the user (blocking)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import docker
from docker.errors import DockerException, ImageNotFound
from docker.models.images import Image
from docker.utils import parse_repository_tag
from requests.exceptions import RequestException

from hermes_runner.errors import SandboxError

# Prints /etc/passwd, "@@", then "<populated 0|1> <uid> <gid>" when directory $1 exists, then "@@end".
PROBE_SCRIPT = """cat /etc/passwd 2>/dev/null
echo @@
o() { echo "$f $3 $4"; }
if [ -d "$1" ]; then
  f=0; [ -n "$(ls -A "$1" 2>/dev/null | head -n 1)" ] && f=1
  o $(ls -ldnL "$1")
fi
echo @@end
"""
PROBE_END = "@@end"
PROBE_ATTEMPTS = 5  # an engine may return a just-exited container's output short (seen with rootless Podman)
PROBE_WAIT_S = 60  # a trial run not ended by then is removed and tried again

REGULAR_UIDS = range(1000, 65534)  # 65534 is `nobody`
NOBODY = (65534, 65534)  # "auto" on an image without a regular user: never root


@dataclass(frozen=True)
class DirInfo:
    """A directory as the image has it."""

    exists: bool
    populated: bool = False
    uid: int = 0
    gid: int = 0


@dataclass(frozen=True)
class Probe:
    """What a trial run of an image found: its users and one directory."""

    passwd: list[tuple[str, int, int]]  # (name, uid, gid) in file order
    workdir: DirInfo


def find_image(client: docker.DockerClient, ref: str, pull: bool) -> Image:
    """The image `ref`, pulled first when missing and `pull` is on."""
    try:
        return client.images.get(ref)
    except ImageNotFound:
        if not pull:
            raise SandboxError("not present locally (docker pull it, or set sandbox.docker.pull=true)") from None
    except DockerException as exc:
        raise SandboxError(f"cannot inspect it: {exc}") from exc
    repo, tag = parse_repository_tag(ref)
    try:
        client.images.pull(repo, tag=tag or "latest")
        return client.images.get(ref)
    except DockerException as exc:
        raise SandboxError(f"pull failed: {exc}") from exc


def probe(client: docker.DockerClient, image_id: str, workdir: str, labels: dict[str, str]) -> Probe:
    """Run the image (as root, no network) to read its users and the working dir.

    The output must end with the script's end line: one cut short (an engine's log of a container that
    has just exited may miss its last lines) would hide the working dir and change the chosen user, so
    the trial runs again."""
    text = ""
    for _ in range(PROBE_ATTEMPTS):
        out = _trial(client, image_id, workdir, labels)
        if out is None:
            continue
        text = out.decode(errors="replace")
        if PROBE_END in text.splitlines():
            break
    else:
        raise SandboxError(
            f"its trial run's output came back incomplete {PROBE_ATTEMPTS} times (the engine lost the end of "
            f"the container's log, or the run did not end within {PROBE_WAIT_S} s): {text[-200:]!r}"
        )
    passwd_text, _, dirs_text = text.partition("@@\n")
    found = DirInfo(False)
    for line in dirs_text.splitlines():
        parts = line.split()
        if len(parts) == 3 and all(x.isdigit() for x in parts):
            populated, uid, gid = map(int, parts)
            found = DirInfo(True, populated == 1, uid, gid)
    return Probe(parse_passwd(passwd_text), found)


def parse_passwd(text: str) -> list[tuple[str, int, int]]:
    users = []
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) >= 4 and parts[2].isdigit() and parts[3].isdigit():
            users.append((parts[0], int(parts[2]), int(parts[3])))
    return users


def _trial(client: docker.DockerClient, image_id: str, workdir: str, labels: dict[str, str]) -> bytes | None:
    """One trial run: its stdout, or None when it did not end in time. Started, waited for, and only then its
    log read whole (not `containers.run`, which follows the log: on Podman that stream may never end once
    the container is gone, and the run hangs)."""
    try:
        c = client.containers.create(
            image_id, entrypoint=["/bin/sh", "-c", PROBE_SCRIPT, "probe"], command=[workdir], user="0:0",
            network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"], labels=labels,
        )  # fmt: skip
    except DockerException as exc:
        raise SandboxError(f"cannot create a trial container: {exc}") from exc
    try:
        try:
            c.start()
        except DockerException as exc:
            raise SandboxError(
                f"cannot run /bin/sh in it (the terminal and file tools need a POSIX shell): {exc}"
            ) from exc
        try:
            code = c.wait(timeout=PROBE_WAIT_S)["StatusCode"]
        except RequestException:  # not ended in time: removed below, and tried again
            return None
        if code != 0:
            err = c.logs(stdout=False, stderr=True).decode(errors="replace")
            raise SandboxError(f"a trial run failed: exit status {code}: {err[-500:]}")
        return c.logs(stdout=True, stderr=False)
    except DockerException as exc:
        raise SandboxError(f"a trial run failed: {exc}") from exc
    finally:
        with contextlib.suppress(DockerException, RequestException):
            c.remove(v=True, force=True)


def choose_user(setting: str | None, image_user: str, found: Probe) -> tuple[str | None, int | None, int | None]:
    """(user for the container or None for the image's default, numeric uid, gid when known).

    "auto": the image's USER when it sets one; else the owner of a working directory the image
    populates (so the task can edit its files); else the first regular user; else nobody (65534),
    never root by default.
    """
    workdir = found.workdir
    if setting is None or setting == "":
        spec = image_user or None
    elif setting == "auto":
        if image_user:
            spec = image_user
        elif workdir.populated:
            spec = f"{workdir.uid}:{workdir.gid}"
        else:
            regular = [(uid, gid) for _, uid, gid in found.passwd if uid in REGULAR_UIDS]
            uid, gid = regular[0] if regular else NOBODY
            spec = f"{uid}:{gid}"
    else:
        spec = setting
    uid, gid = numeric_ids(spec or "0", found.passwd)
    return spec, uid, gid


def numeric_ids(spec: str, passwd: list[tuple[str, int, int]]) -> tuple[int | None, int | None]:
    """uid and gid of a "user[:group]" spec, looked up in the image's /etc/passwd."""
    user, _, group = spec.partition(":")
    entry = next((e for e in passwd if e[0] == user or (user.isdigit() and e[1] == int(user))), None)
    uid = int(user) if user.isdigit() else (entry[1] if entry else None)
    gid = int(group) if group.isdigit() else (entry[2] if entry and not group else None)
    return uid, gid
