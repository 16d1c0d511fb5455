"""How an external agent program gets into the local sandbox (`agent.install`): a directory of this host bound
read-only at its own path (a virtualenv's base Python too), or a pip spec installed once into a venv of the cache."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hermes_runner.config import SandboxConfig
from hermes_runner.errors import ConfigError

log = logging.getLogger(__name__)

PIP_PREFIX = "pip:"
SYSTEM_PYTHON = "/usr/bin/python3"
BOX_PROXY_DIR = "/run/hermes-proxy"  # where a container sees the run's proxy dir (its prompts' sockets)


@dataclass
class Install:
    """Where the program is: the dirs the sandbox must see (read-only), its bin/ (first on PATH), its version."""

    binds: list[str] = field(default_factory=list)
    bin_dir: str = ""
    version: str = ""
    python: str = "python3"  # what runs the sandbox's model bridge: the venv's own Python, else the system's


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hermes-runner" / "agents"


def _pip_venv(spec: str) -> Path:
    """A venv holding `spec` (pip's requirement syntax, several separated by spaces), made once per spec."""
    venv = cache_root() / hashlib.sha256(spec.encode()).hexdigest()[:16]
    stamp = venv / ".hermes-installed"
    if stamp.exists():
        return venv
    log.info("agent.install: installing %s into %s", spec, venv)
    try:
        _make_venv(venv)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *spec.split()]
        subprocess.run(pip, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        lines = (exc.stderr or "").strip().splitlines() if isinstance(exc.stderr, str) else []
        tail = [x.strip() for x in lines if x.strip() and not x.startswith(("WARNING:", "note:", "hint:"))][-4:]
        raise ConfigError(f"agent.install={PIP_PREFIX}{spec}: pip failed: {' | '.join(tail) or exc}") from None
    stamp.write_text(spec)
    return venv


def _make_venv(venv: Path) -> None:
    """A venv of the system Python when it can make one (the local sandbox sees /usr, and a Debian-like image has
    it at the same path), else of the runner's."""
    system = Path(SYSTEM_PYTHON)
    for python in ([str(system)] if system.exists() else []) + [sys.executable]:
        made = subprocess.run([python, "-m", "venv", "--clear", str(venv)], capture_output=True, text=True)
        if made.returncode == 0:
            return
    raise subprocess.CalledProcessError(made.returncode, made.args, made.stdout, made.stderr)


def _base_prefix(venv: Path) -> str | None:
    """The prefix of a venv's base Python (pyvenv.cfg `home` is its bin/), when it is not a system path."""
    try:
        text = (venv / "pyvenv.cfg").read_text()
    except OSError:
        return None
    m = re.search(r"^home\s*=\s*(.+)$", text, re.M)
    return str(Path(m.group(1).strip()).parent) if m else None


def version_of(root: Path, package: str | None) -> str:
    """The installed version of `package` in the venv or dir `root` ("" when not found)."""
    if not package:
        return ""
    norm = re.sub(r"[-_.]+", "_", package).lower()
    for meta in root.glob("lib/python*/site-packages/*.dist-info/METADATA"):
        name, _, version = meta.parent.name.removesuffix(".dist-info").rpartition("-")
        if re.sub(r"[-_.]+", "_", name).lower() == norm:
            return version
    return ""


def resolve(install: str | None, package: str | None) -> Install:
    """The program's install (ConfigError: a path that is not a directory, a pip spec pip cannot install)."""
    if not install:
        return Install()
    root = _pip_venv(install[len(PIP_PREFIX) :].strip()) if install.startswith(PIP_PREFIX) else Path(install)
    if not root.is_absolute() or not root.is_dir():
        raise ConfigError(f"agent.install={install!r} is not an absolute path of a directory (or pip:<spec>)")
    # at the path given and at its real one: a venv's scripts name their Python by the path it was made at
    binds = list(dict.fromkeys([str(root), str(root.resolve())]))
    if (base := _base_prefix(root)) and not any(base == p or base.startswith(p + "/") for p in ("/usr", "/opt")):
        binds.append(base)
    bin_dir = root / "bin"
    python = bin_dir / "python"
    return Install(
        binds,
        str(bin_dir if bin_dir.is_dir() else root),
        version_of(root, package),
        str(python) if python.exists() else "python3",
    )


def sandbox_with(box: SandboxConfig, install: Install) -> tuple[SandboxConfig, tuple[str, str] | None]:
    """The sandbox section with the program's dirs bound read-only; a container also gets the run's proxy dir
    (made here: a socket per prompt in it), returned as (its host path, its path in the container)."""
    local = dataclasses.replace(box.local, system_paths=[*box.local.system_paths, *install.binds])
    if box.backend == "local":
        return dataclasses.replace(box, local=local), None
    share = tempfile.mkdtemp(prefix="hermes-proxy-")
    os.chmod(share, 0o755)
    volumes = [*box.docker.volumes, *(f"{b}:{b}:ro" for b in install.binds), f"{share}:{BOX_PROXY_DIR}:ro"]
    docker = dataclasses.replace(box.docker, volumes=volumes)
    return dataclasses.replace(box, local=local, docker=docker), (share, BOX_PROXY_DIR)
