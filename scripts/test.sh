#!/usr/bin/env bash
# Runs every check CI runs: formatting, lints, and the whole test suite (unit, reference-value,
# end-to-end CLI tests) in the CUDA build, in the release profile that the main job also uses
# (Burn is slow to build and slow to run unoptimised); then `dptrain selftest` and the GPU check's
# dry run. Build outputs go to a persistent directory shared across clones.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/dp-target}"
cargo fmt --all --check
# Lints on the build without CUDA, what a plain `cargo build` gives (the few lines only a CUDA
# build compiles are held to no compiler warning below).
cargo clippy --workspace --all-targets --locked -- -D warnings
# The libraries' documentation, warning-free (`#![warn(missing_docs)]` in every library crate, and
# no broken link); it reuses the dependencies clippy checked.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

# The tests in the CUDA build (`--features dptrain/cuda`: Burn's CUDA backend beside wgpu),
# compiled and linked with the LLVM of scripts/with-cuda-llvm.sh (PyPI's; nothing from GitHub).
# One Burn feature set serves the tests, the examples and the binary the GPU check carries. None
# of it needs a GPU: here `--device cuda` is a one-line error (docs/BENCHMARKS.md, "CUDA").
# Burn restores an optimiser's state on its default device, CUDA first: the library tests that
# resume runs say where (`dptrain` sets the same itself; `PrivacyEngine::resume` refuses in one line
# where the default device cannot open).
export BURN_DEVICE=flex
cuda=(scripts/with-cuda-llvm.sh cargo test --workspace --locked --release --features dptrain/cuda)
log=$(mktemp)
"${cuda[@]}" --no-run 2>&1 | tee "$log"
if grep -q '^warning' "$log"; then
    echo "error: the CUDA build has compiler warnings (above)" >&2
    exit 1
fi
"${cuda[@]}"
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
