#!/usr/bin/env bash
# Runs every check CI runs: formatting, lints, and the whole test suite (unit, reference-value,
# end-to-end CLI tests), in the release profile that the main job also uses (Burn is slow to build
# and slow to run unoptimised). Build outputs go to a persistent directory shared across clones.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/dp-target}"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked --release
