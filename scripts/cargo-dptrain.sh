#!/usr/bin/env bash
# Runs `cargo SUBCOMMAND ARGS...` on dptrain with the one feature set the tests build: Burn's CUDA
# backend beside wgpu and the CPU (`--features cuda`, its LLVM from PyPI through
# scripts/with-cuda-llvm.sh) on Linux x86_64, where PyPI's pinned LLVM exists, and the ndarray
# reference the tests turn on (`--features ndarray`). The side-by-side, the GPU check and the
# other measuring scripts then run the binary the tests built, and compile nothing. (The main job,
# scripts/demo.sh, builds the smallest set for this machine instead.)
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
    exec scripts/with-cuda-llvm.sh cargo "$subcommand" --features cuda,ndarray "$@"
fi
exec cargo "$subcommand" --features ndarray "$@"
