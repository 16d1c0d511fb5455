#!/usr/bin/env bash
# The system packages and services the test suite needs (tests/helpers/system.py says which):
# bubblewrap, Chromium + chromedriver + a font, a Docker engine with the test images, Podman (rootful and
# rootless) with the same images, a single-node SLURM cluster (scripts/ci_slurm_setup.sh).
# As root with apt-get it installs what is missing (Docker: scripts/ci_docker_setup.sh, Podman: scripts/ci_podman_setup.sh); otherwise
# it prints what is missing and how to install it, and the tests that need it fail with that message
# (HERMES_SKIP_DOCKER=1 / HERMES_SKIP_PODMAN=1 / HERMES_SKIP_SLURM=1 / HERMES_SKIP_BROWSER=1 / HERMES_SKIP_BWRAP=1 make them skip instead).
# Idempotent: when everything is there it only checks (well under a second).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
sysreq() { "$PY" tests/helpers/system.py "$@"; }

sysreq check 2>/dev/null && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  t0=$SECONDS
  pkgs=$(sysreq apt)
  if [ -n "$pkgs" ]; then
    echo "[setup] installing system packages for the tests: $pkgs"
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086
    apt-get update -qq && apt-get install -y -qq --no-install-recommends $pkgs >/dev/null ||
      echo "[setup] apt-get could not install $pkgs (above)" >&2
  fi
  if ! sysreq ready docker; then
    scripts/ci_docker_setup.sh || echo "[setup] the Docker set-up failed (above); the Docker tests will fail" >&2
  fi
  if ! sysreq ready podman; then
    scripts/ci_podman_setup.sh || echo "[setup] the Podman set-up failed (above); the Podman tests will fail" >&2
  fi
  if ! sysreq ready slurm; then
    scripts/ci_slurm_setup.sh || echo "[setup] the SLURM set-up failed (above); the SLURM tests will fail" >&2
  fi
  echo "[setup] system set-up done ($((SECONDS - t0)) s)"
fi
# Whatever is still missing: say what and how to install it (the tests that need it fail with the same words).
sysreq check || true
