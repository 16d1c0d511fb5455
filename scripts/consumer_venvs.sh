#!/usr/bin/env bash
# Side virtualenvs for the tools that consume our output (HF datasets at each major version, TRL,
# LLaMA-Factory's converter, hermes-agent, ...), one per tests/consumers/<name>.txt requirements file,
# at .venv-consumers/<name>/. Tests run those tools in a subprocess of that venv (tests/helpers/consumers.py).
# Idempotent: a venv is rebuilt only when its requirements file changes (stamp = file hash).
# A requirements file may name its own Python in a header line: "# python: 3.12.1" (a pyenv version: the venv is
# made by `PYENV_VERSION=3.12.1 python3.12`), for consumers that do not install on the default one, or
# "# python: /usr/bin/python3" (an interpreter path: a venv a container image can run too).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
ROOT=${CONSUMERS_DIR:-.venv-consumers}
mkdir -p "$ROOT"
for req in tests/consumers/*.txt; do
  [ -e "$req" ] || continue
  name=$(basename "$req" .txt)
  venv="$ROOT/$name"
  stamp="$venv/.stamp-$(sha1sum "$req" | cut -c1-12)"
  [ -e "$stamp" ] && continue
  echo "[setup] consumer venv $name ($req)"
  rm -rf "$venv"
  # A requirements file may name its Python: "# python: 3.12.1" (a pyenv version: made by
  # `PYENV_VERSION=3.12.1 python3.12`) or "# python: /usr/bin/python3" (an interpreter a container image has too).
  pyver=$(sed -n 's/^# python: //p' "$req" | head -n 1)
  case "$pyver" in
    "") "$PY" -m venv "$venv" ;;
    /*) "$pyver" -m venv "$venv" || { echo "[setup] $name needs $pyver" >&2; exit 1; } ;;
    *) PYENV_VERSION=$pyver "python${pyver%.*}" -m venv "$venv" \
         || { echo "[setup] $name needs Python $pyver (pyenv install $pyver)" >&2; exit 1; } ;;
  esac
  "$venv/bin/pip" install -q --upgrade pip
  # A requirements file may carry pip options on its first line, e.g. "# pip: --no-deps".
  opts=$(sed -n '1s/^# pip: //p' "$req")
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q $opts -r "$req"
  touch "$stamp"
done
