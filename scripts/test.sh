#!/usr/bin/env bash
# Runs every check CI runs: formatting, lints, and the whole test suite (unit, reference-value,
# end-to-end CLI tests) in the CUDA build, in the release profile that the main job also uses
# (Burn is slow to build and slow to run unoptimised); then `dptrain selftest` and the GPU check's
# dry run. Build outputs go to a persistent directory shared across clones.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/dp-target}"
cargo fmt --all --check
# One Burn feature set for the lints, the docs and the tests (`--release --features dptrain/cuda`,
# and the ndarray reference the tests turn on): the lints then reuse the build scripts and
# procedural macros the test build compiles, and the docs reuse what the lints checked (a
# separate check of every dependency in the dev profile took 8.4 min cold; this one about 3).
# The CUDA build compiles and links with the LLVM of scripts/with-cuda-llvm.sh (PyPI's; nothing
# from GitHub). None of it needs a GPU: here `--device cuda` is a one-line error
# (docs/BENCHMARKS.md, "CUDA").
with_llvm=(scripts/with-cuda-llvm.sh cargo)
one_set=(--workspace --locked --release --features dptrain/cuda)
"${with_llvm[@]}" clippy "${one_set[@]}" --all-targets -- -D warnings
# The libraries' documentation, warning-free (`#![warn(missing_docs)]` in every library crate, and
# no broken link).
RUSTDOCFLAGS="-D warnings" "${with_llvm[@]}" doc "${one_set[@]}" --no-deps --quiet
# The main job's builds on a machine without an NVIDIA GPU (scripts/demo.sh): the default features
# (wgpu and the CPU; no CUDA, no ndarray) and, without a GPU at all, the CPU alone; linted, so the
# lines only those sets compile are checked here.
cargo clippy --release --locked --bin dptrain -- -D warnings
cargo clippy --release --locked --bin dptrain --no-default-features -- -D warnings

# The tests in the CUDA build. Burn restores an optimiser's state on its default device, CUDA
# first: the library tests that resume runs say where (`dptrain` sets the same itself;
# `PrivacyEngine::resume` refuses in one line where the default device cannot open).
export BURN_DEVICE=flex
cuda=("${with_llvm[@]}" test "${one_set[@]}")
log=$(mktemp)
"${cuda[@]}" --no-run 2>&1 | tee "$log"
if grep -q '^warning' "$log"; then
    echo "error: the CUDA build has compiler warnings (above)" >&2
    exit 1
fi
"${cuda[@]}"
# The binary of the tests' feature set at release/dptrain (a main job may have left its own
# there): nothing compiles.
scripts/cargo-dptrain.sh build --release --locked --bin dptrain --quiet
dptrain="$CARGO_TARGET_DIR/release/dptrain"
grep -q cuda <<<"$("$dptrain" --version)"
"$dptrain" selftest --device cpu
# wgpu where a Vulkan driver is installed (lavapipe counts; CI requires it), and the GPU check's
# steps on the smallest workload (docs/BENCHMARKS.md, "The GPU check").
if [ -n "${DPTRAIN_REQUIRE_WGPU:-}" ] || ls /usr/share/vulkan/icd.d/*.json >/dev/null 2>&1; then
    "$dptrain" selftest --device wgpu
    scripts/gpu-check.sh --dry-run --dptrain "$dptrain" --out "$(mktemp -d)" --only mnist-cnn --rounds 1 --steps 2 \
        --phases selftest,side-by-side,kernels,step-phases
fi
