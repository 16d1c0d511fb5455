#!/usr/bin/env bash
# Side virtualenvs for the tools that consume our output (HF datasets at each major version, TRL,
# LLaMA-Factory's converter, hermes-agent, ...), one per tests/consumers/<name>.txt requirements file,
# at .venv-consumers/<name>/. Tests run those tools in a subprocess of that venv (tests/helpers/consumers.py).
# Idempotent: a venv is rebuilt only when its requirements file changes (stamp = file hash).
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
  # A requirements file may name its Python, e.g. "# python: /usr/bin/python3" (a venv an image can run too).
  py=$(sed -n 's/^# python: //p' "$req" | head -n 1)
  "${py:-$PY}" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  # A requirements file may carry pip options on its first line, e.g. "# pip: --no-deps".
  opts=$(sed -n '1s/^# pip: //p' "$req")
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q $opts -r "$req"
  touch "$stamp"
done
