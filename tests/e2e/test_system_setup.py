"""What `make test` needs from the machine: the check says exactly what is missing and how to install
it, the set-up script says the same where it cannot install, and the tests that need it fail with it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import system
from tests.helpers.run import ROOT

PY = sys.executable


def bare_path(tmp_path: Path, *tools: str) -> str:
    """A PATH holding only `tools` (symlinks to the real ones): what a fresh machine without the others has."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        real = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        (bin_dir / tool).symlink_to(real)
    return str(bin_dir)


def sysreq(*args: str, path: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_SKIP_")}
    return subprocess.run(
        [PY, str(ROOT / "tests/helpers/system.py"), *args],
        capture_output=True, text=True, cwd=ROOT, env={**clean, "PATH": path, **env},
    )  # fmt: skip


def test_check_names_what_is_missing_and_how_to_install_it(tmp_path):
    res = sysreq("check", path=bare_path(tmp_path))
    assert res.returncode == 1 and res.stdout == ""
    err = res.stderr
    assert (
        "[setup] MISSING bwrap: bubblewrap (confinement of the local sandbox) is missing: bwrap is not on PATH." in err
    )
    assert "no Chromium on PATH (chromium, chromium-browser, google-chrome, google-chrome-stable)" in err
    assert "chromedriver is not on PATH" in err
    assert "MISSING docker: a Docker engine with the test images local/busybox:ci, local/bookworm:ci is missing" in err
    assert "the docker command is not on PATH" in err
    # no apt-get on this PATH: the packages are named, the Debian command is not offered
    assert "with your package manager, the equivalents of the Debian packages chromium chromium-driver" in err
    assert "scripts/ci_docker_setup.sh (Debian: installs docker.io, starts dockerd" in err
    assert "HERMES_SKIP_DOCKER=1 skips the tests that need it instead" in err
    assert "MISSING podman: rootful and rootless (hermes-podman) Podman services" in err
    assert "the podman command is not on PATH" in err and "scripts/ci_podman_setup.sh (Debian" in err
    assert "HERMES_SKIP_PODMAN=1 skips the tests that need it instead" in err
    assert "MISSING slurm: a single-node SLURM cluster (munge, slurmctld, slurmd) is missing" in err
    assert "the SLURM commands (sinfo, sbatch) are not on PATH" in err and "scripts/ci_slurm_setup.sh (Debian" in err
    assert "the tests that need bwrap, browser, docker, podman, slurm will fail until then" in err


def test_with_apt_the_hint_is_the_command_to_run(tmp_path):
    res = sysreq("check", path=bare_path(tmp_path, "apt-get"))
    sudo = "" if os.geteuid() == 0 else "sudo "
    assert f"Install: {sudo}apt-get install -y --no-install-recommends bubblewrap." in res.stderr
    assert f"Install: {sudo}apt-get install -y --no-install-recommends chromium chromium-driver." in res.stderr
    assert sysreq("apt", path=bare_path(tmp_path)).stdout.split() == ["bubblewrap", "chromium", "chromium-driver"]


def test_opt_out_is_neither_checked_nor_installed(tmp_path):
    path = bare_path(tmp_path)
    res = sysreq("check", path=path, HERMES_SKIP_DOCKER="1", HERMES_SKIP_BROWSER="1")
    assert "docker: not checked (HERMES_SKIP_DOCKER=1: its tests skip)" in res.stderr
    assert "MISSING docker" not in res.stderr and "MISSING browser" not in res.stderr
    assert "MISSING bwrap" in res.stderr and res.returncode == 1
    assert sysreq("ready", "docker", path=path, HERMES_SKIP_DOCKER="1").returncode == 0
    assert sysreq("ready", "docker", path=path).returncode == 1
    assert sysreq("apt", path=path, HERMES_SKIP_BROWSER="1").stdout.split() == ["bubblewrap"]


def test_this_machine_has_everything():
    """`make test` (scripts/setup_system.sh) installed it all here (but what HERMES_SKIP_*=1 opts out of)."""
    res = subprocess.run([PY, str(ROOT / "tests/helpers/system.py"), "check"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert system.problems() == {}


def test_setup_script_without_apt_says_what_to_install_and_lets_the_tests_fail(tmp_path):
    """Not root or no apt-get: nothing is installed, everything missing is named, `make test` goes on."""
    path = bare_path(tmp_path, "id", "dirname")
    res = subprocess.run(
        [shutil.which("bash"), str(ROOT / "scripts/setup_system.sh")],
        capture_output=True, text=True, env={"PATH": path, "HOME": str(tmp_path), "PYTHON": PY},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "installing" not in res.stdout + res.stderr
    for name in ("bwrap", "browser", "docker", "podman", "slurm"):
        assert f"[setup] MISSING {name}:" in res.stderr


@pytest.mark.parametrize(
    ("test", "skip_var", "words"),
    [
        (
            "tests/unit/tools/test_tools.py::test_bubblewrap_confines_commands",
            "HERMES_SKIP_BWRAP",
            "bwrap is not on PATH",
        ),
        ("tests/e2e/test_report.py::test_sweep_report_compares_jobs", "HERMES_SKIP_BROWSER", "no Chromium on PATH"),
        (
            "tests/e2e/test_docker_sandbox.py::test_network_is_off_by_default",
            "HERMES_SKIP_DOCKER",
            "docker command is not",
        ),
        (
            "tests/e2e/test_podman_sandbox.py::test_per_row_image_and_cwd[rootful]",
            "HERMES_SKIP_PODMAN",
            "podman command is not",
        ),
        (
            "tests/e2e/test_sweep_slurm.py::test_cancelled_job_is_recorded_and_the_rerun_makes_only_the_missing_calls",
            "HERMES_SKIP_SLURM",
            "the SLURM commands (sinfo, sbatch) are not on PATH",
        ),
    ],
)
def test_a_test_that_needs_what_is_missing_fails_with_the_message(test, skip_var, words, tmp_path):
    path = bare_path(tmp_path)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_SKIP_")}
    argv = [PY, "-m", "pytest", test, "-q", "-p", "no:cacheprovider"]
    res = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env={**clean, "PATH": path})
    out = " ".join(res.stdout.split())
    assert res.returncode == 1 and ("1 failed" in out or "1 error" in out), out[-3000:]
    assert words in out and f"{skip_var}=1 skips the tests that need it instead" in out
    res = subprocess.run(
        argv + ["-rs"], capture_output=True, text=True, cwd=ROOT, env={**clean, "PATH": path, skip_var: "1"}
    )
    out = " ".join(res.stdout.split())
    assert res.returncode == 0 and "1 skipped" in out and f"{skip_var}=1" in out, out[-3000:]


def test_make_test_runs_the_system_setup_then_pytest():
    res = subprocess.run(["make", "-n", "test"], capture_output=True, text=True, cwd=ROOT)
    lines = res.stdout.splitlines()
    setup = next(i for i, line in enumerate(lines) if "scripts/setup_system.sh" in line)
    assert setup < next(i for i, line in enumerate(lines) if "-m pytest" in line)
    ci = [line for line in (ROOT / ".ci/run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == "make test" and len(ci) == 3  # CI takes the README's path: set -e, cd, make test
