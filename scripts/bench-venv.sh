#!/usr/bin/env bash
# The throwaway virtual environment the measuring scripts time PyTorch and Opacus in (never a
# dependency of the repository or of CI): $DPTRAIN_BENCH_VENV, else /var/tmp/dp-bench-venv, made
# with torch and opacus from PyPI the first time. Prints its path.
set -euo pipefail
venv="${DPTRAIN_BENCH_VENV:-/var/tmp/dp-bench-venv}"
if ! "$venv/bin/python" -c "import torch, opacus" 2>/dev/null; then
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet torch opacus >&2
fi
echo "$venv"
