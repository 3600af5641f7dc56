#!/usr/bin/env bash
# Runs `cargo SUBCOMMAND ARGS...` on dptrain with the one feature set the tests build: Burn's CUDA
# backend beside wgpu and the CPU (`--features cuda`, its LLVM from PyPI through
# scripts/with-cuda-llvm.sh) on Linux x86_64, where PyPI's pinned LLVM exists; the default
# features elsewhere. The main job, the side-by-side and the tests then share one compiled Burn.
#
#   scripts/cargo-dptrain.sh build --release --locked
#   scripts/cargo-dptrain.sh run --release --locked -- train --help
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: $0 SUBCOMMAND [ARGS...] (e.g. build --release --locked)" >&2; exit 2; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/dp-target}"
subcommand=$1
shift
if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
    exec scripts/with-cuda-llvm.sh cargo "$subcommand" --features cuda "$@"
fi
exec cargo "$subcommand" "$@"
