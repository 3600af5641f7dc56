#!/usr/bin/env bash
# dptrain against PyTorch and Opacus on this machine, in one run (docs/BENCHMARKS.md): makes a
# throwaway virtual environment outside the repository with torch and opacus from PyPI (never a
# dependency of the repository or of CI), builds dptrain, and runs scripts/side_by_side.py, which
# refuses a loaded machine and prints one table.
#
#   scripts/side-by-side.sh                    # CPU, the three workloads
#   scripts/side-by-side.sh --device cuda      # PyTorch on CUDA, dptrain on wgpu
#   scripts/side-by-side.sh --only mnist-cnn --rounds 5
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/dp-target}"
venv=$(scripts/bench-venv.sh)
# The binary the tests and the main job build (scripts/cargo-dptrain.sh): no second Burn.
scripts/cargo-dptrain.sh build --release --locked --quiet
exec "$venv/bin/python" scripts/side_by_side.py --dptrain "$CARGO_TARGET_DIR/release/dptrain" "$@"
