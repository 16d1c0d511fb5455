"""What the test suite needs from the machine besides Python packages: check, explain, install.

Standard library only: scripts/setup_system.sh runs it with the system's python3.

    python3 tests/helpers/system.py check     print what is missing and how to install it; exit 1 if anything is
    python3 tests/helpers/system.py apt       the Debian packages that would install what is missing (one line)
    python3 tests/helpers/system.py ready NAME   exit 0 if requirement NAME (bwrap, browser, docker, podman, slurm) is met

A requirement whose opt-out variable is set (HERMES_SKIP_DOCKER=1, ...) is neither installed nor
checked: the tests that need it skip, with the reason. Otherwise they fail with the message below.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")  # as services/browser.py
FONTS = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/TTF/DejaVuSans.ttf")
DOCKER_IMAGES = ("local/busybox:ci", "local/bookworm:ci")  # built by scripts/ci_docker_setup.sh
DOCKER_SETUP = "scripts/ci_docker_setup.sh"
PODMAN_SETUP = "scripts/ci_podman_setup.sh"
SLURM_SETUP = "scripts/ci_slurm_setup.sh"
PODMAN_USER = "hermes-podman"  # the rootless Podman's user, made by PODMAN_SETUP
PODMAN_ROOTFUL = "/run/podman/podman.sock"


def podman_sockets() -> dict[str, str]:
    """The API socket PODMAN_SETUP starts, by mode (rootful, rootless)."""
    try:
        uid = pwd.getpwnam(PODMAN_USER).pw_uid
    except KeyError:
        uid = -1  # no such user yet: a path that does not exist
    return {"rootful": PODMAN_ROOTFUL, "rootless": f"/run/user/{uid}/podman/podman.sock"}


@dataclass(frozen=True)
class Missing:
    what: str  # what is wrong, in a few words
    apt: tuple[str, ...] = ()  # the Debian packages that fix it (empty: `script` does)
    script: str = DOCKER_SETUP  # the set-up script that fixes it when no package does


@dataclass(frozen=True)
class Requirement:
    name: str  # also the pytest marker of the tests that need it
    purpose: str
    opt_out: str  # env var: =1 turns the failures of these tests into skips

    def opted_out(self) -> bool:
        return os.environ.get(self.opt_out) == "1"

    def missing(self) -> list[Missing]:
        return CHECKS[self.name]()


def _bwrap() -> list[Missing]:
    out = [] if shutil.which("bwrap") else [Missing("bwrap is not on PATH", ("bubblewrap",))]
    # the agent programs' venvs (tests/consumers/mini_swe_agent.txt) are made with the system Python
    if Path("/usr/bin/python3").exists() and not list(Path("/usr/lib").glob("python3*/ensurepip/__init__.py")):
        out.append(Missing("the system Python cannot make venvs (agent programs' venvs)", ("python3-venv",)))
    return out


def _browser() -> list[Missing]:
    out = []
    if not any(shutil.which(name) for name in CHROMIUM):
        out.append(Missing(f"no Chromium on PATH ({', '.join(CHROMIUM)})", ("chromium",)))
    if not shutil.which("chromedriver"):
        out.append(Missing("chromedriver is not on PATH", ("chromium-driver",)))
    if not any(Path(f).is_file() for f in FONTS):
        out.append(Missing(f"no DejaVu font ({FONTS[0]})", ("fonts-dejavu-core",)))
    return out


def _run(*argv: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _docker() -> list[Missing]:
    if not shutil.which("docker"):
        return [Missing("the docker command is not on PATH (no Docker engine installed)")]
    res = _run("docker", "image", "inspect", "--format", "{{.Id}}", *DOCKER_IMAGES)
    if res is not None and res.returncode == 0:
        return []
    info = _run("docker", "info", "--format", "{{.ServerVersion}}")
    if info is None or info.returncode != 0:
        err = (info.stderr.strip().splitlines() or ["no answer"])[-1] if info else "no answer within 30 s"
        return [Missing(f"no Docker engine answers (docker info: {err})")]
    have = {img for img in DOCKER_IMAGES if (r := _run("docker", "image", "inspect", img)) and r.returncode == 0}
    return [Missing(f"the test image {img} is not built") for img in DOCKER_IMAGES if img not in have]


def _podman() -> list[Missing]:
    if not shutil.which("podman"):
        return [Missing("the podman command is not on PATH", script=PODMAN_SETUP)]
    out = []
    for mode, sock in podman_sockets().items():
        url = f"unix://{sock}"
        if not all((r := _run("podman", "--remote", "--url", url, "image", "exists", i)) and r.returncode == 0
                   for i in DOCKER_IMAGES):  # fmt: skip
            out.append(Missing(f"no {mode} Podman service with the test images at {sock}", script=PODMAN_SETUP))
    return out


def _slurm() -> list[Missing]:
    if not (shutil.which("sinfo") and shutil.which("sbatch")):
        return [Missing("the SLURM commands (sinfo, sbatch) are not on PATH", script=SLURM_SETUP)]
    res = _run("sinfo", "-h", "-o", "%T")
    states = res.stdout.split() if res is not None and res.returncode == 0 else []
    if not any(s.rstrip("*~#!%$@^-").startswith(("idle", "mixed", "alloc", "complet")) for s in states):
        why = (res.stderr.strip().splitlines() or ["no answer"])[-1] if res and res.returncode else " ".join(states)
        return [Missing(f"no SLURM node takes jobs (sinfo: {why or 'no nodes'})", script=SLURM_SETUP)]
    return []


CHECKS = {"bwrap": _bwrap, "browser": _browser, "docker": _docker, "podman": _podman, "slurm": _slurm}
REQUIREMENTS = (
    Requirement("bwrap", "bubblewrap (confinement of the local sandbox)", "HERMES_SKIP_BWRAP"),
    Requirement("browser", "Chromium, chromedriver and a font (browser toolset, report tests)", "HERMES_SKIP_BROWSER"),
    Requirement("docker", f"a Docker engine with the test images {', '.join(DOCKER_IMAGES)}", "HERMES_SKIP_DOCKER"),
    Requirement(
        "podman", f"rootful and rootless ({PODMAN_USER}) Podman services with the test images", "HERMES_SKIP_PODMAN"
    ),
    Requirement("slurm", "a single-node SLURM cluster (munge, slurmctld, slurmd)", "HERMES_SKIP_SLURM"),
)
BY_NAME = {r.name: r for r in REQUIREMENTS}


def can_install() -> bool:
    """Whether setup_system.sh installs things itself: root with apt-get."""
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def how_to_install(missing: list[Missing]) -> str:
    sudo = "" if os.geteuid() == 0 else "sudo "
    apt = sorted({p for m in missing for p in m.apt})
    steps = []
    if apt:
        pkgs = " ".join(apt)
        if shutil.which("apt-get"):
            steps.append(f"{sudo}apt-get install -y --no-install-recommends {pkgs}")
        else:
            steps.append(f"with your package manager, the equivalents of the Debian packages {pkgs}")
    scripts = {m.script for m in missing if not m.apt}
    if DOCKER_SETUP in scripts:
        steps.append(
            f"{sudo}{DOCKER_SETUP} (Debian: installs docker.io, starts dockerd, builds {', '.join(DOCKER_IMAGES)}; "
            "with an engine of your own it only builds the images)"
        )
    if PODMAN_SETUP in scripts:
        steps.append(
            f"{sudo}{PODMAN_SETUP} (Debian, after {DOCKER_SETUP}: installs podman, starts its rootful service and "
            f"a rootless one as the user {PODMAN_USER}, copies the test images from Docker)"
        )
    if SLURM_SETUP in scripts:
        steps.append(
            f"{sudo}{SLURM_SETUP} (Debian: installs slurm-wlm and munge, writes /etc/slurm/slurm.conf for one node"
            " `localhost`, starts munged, slurmctld and slurmd)"
        )
    return " then ".join(steps)


def explain(req: Requirement, missing: list[Missing]) -> str:
    """The message of a missing requirement: what, why, how to install, how to skip instead."""
    return (
        f"{req.purpose} is missing: {'; '.join(m.what for m in missing)}. "
        f"Install: {how_to_install(missing)}. "
        "`make test` installs it by itself when run as root with apt-get; "
        f"{req.opt_out}=1 skips the tests that need it instead."
    )


def problems() -> dict[str, str]:
    """Requirement name -> message, for every requirement that is missing and not opted out."""
    out = {}
    for req in REQUIREMENTS:
        if not req.opted_out() and (missing := req.missing()):
            out[req.name] = explain(req, missing)
    return out


def apt_packages() -> list[str]:
    return sorted({p for r in REQUIREMENTS if not r.opted_out() for m in r.missing() for p in m.apt})


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else "check"
    if cmd == "apt":
        print(" ".join(apt_packages()))
        return 0
    if cmd == "ready" and len(argv) == 2 and argv[1] in BY_NAME:
        req = BY_NAME[argv[1]]
        return 0 if req.opted_out() or not req.missing() else 1
    if cmd == "check":
        found = problems()
        for req in REQUIREMENTS:
            if req.opted_out():
                print(f"[setup] {req.name}: not checked ({req.opt_out}=1: its tests skip)", file=sys.stderr)
        for name, msg in found.items():
            print(f"[setup] MISSING {name}: {msg}", file=sys.stderr)
        if found:
            print(f"[setup] the tests that need {', '.join(found)} will fail until then", file=sys.stderr)
        return 1 if found else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
