#!/usr/bin/env bash
# Runs every check CI runs: formatting, lints, and the whole test suite (unit, reference-value,
# end-to-end CLI tests), in the release profile that the main job also uses (Burn is slow to build
# and slow to run unoptimised). Build outputs go to a persistent directory shared across clones.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/dp-target}"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The optional CUDA build (`--features cuda`), type-checked only: its build scripts download a
# prebuilt LLVM from GitHub, which DOCS_RS=1 skips (nothing is linked in a check).
DOCS_RS=1 cargo clippy --workspace --all-targets --locked --features dptrain/cuda -- -D warnings
cargo test --workspace --locked --release
