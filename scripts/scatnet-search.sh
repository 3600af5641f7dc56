#!/usr/bin/env bash
# Hyper-parameter search for ScatterNet models on Fashion-MNIST at a certified epsilon, on a
# held-out part of the training set (--validation 10000: trained on the first 50,000 training
# examples, evaluated on the last 10,000), never on the test set. The search itself is not
# accounted for (as in the papers). Prints one line per setting: model, lot, epochs, lr,
# validation accuracy.
#   scripts/scatnet-search.sh [EPSILON] [MODEL...]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/dp-target}"
cargo build --release --locked --bin dptrain >&2
eps="${1:-3}"
shift || true
models=("${@:-scatnet-linear}")
out=$(mktemp -d)
for model in "${models[@]}"; do
  for lot in 4096 8192 16384; do
    for epochs in 20 40 60; do
      for lr in 4 8 16 32; do
        acc=$("$CARGO_TARGET_DIR/release/dptrain" train --device cpu --dataset fashion-mnist --model "$model" \
          --validation 10000 --lot-size "$lot" --epochs "$epochs" --learning-rate "$lr" --momentum 0.9 \
          --clip-norm 0.1 --target-epsilon "$eps" --accountant prv --seed 1 --checkpoint-every 0 \
          --out-dir "$out/run" --overwrite --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["test_accuracy"])')
        echo "$model lot $lot epochs $epochs lr $lr validation $acc"
      done
    done
  done
done
rm -rf "$out"
