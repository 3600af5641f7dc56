#!/usr/bin/env bash
# Hyper-parameter search for ScatterNet models on Fashion-MNIST at a certified epsilon, on a
# held-out part of the training set (--validation 10000: trained on the first 50,000 training
# examples, evaluated on the last 10,000), never on the test set. The search itself is not
# accounted for (as in the papers). Prints one line per setting.
#   scripts/scatnet-search.sh [EPSILON [MODEL]]
# The grid is LOTS, EPOCHS, RATES and EMAS (space-separated; "none" for no average).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/dp-target}"
dptrain="${DPTRAIN:-$CARGO_TARGET_DIR/release/dptrain}"
[ -n "${DPTRAIN:-}" ] || scripts/cargo-dptrain.sh build --release --locked --bin dptrain >&2
eps="${1:-3}"
model="${2:-scatnet-linear}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for lot in ${LOTS:-4096 8192}; do
  for epochs in ${EPOCHS:-20 40}; do
    for lr in ${RATES:-8 16 32}; do
      for ema in ${EMAS:-none 0.999}; do
        average=()
        [ "$ema" = none ] || average=(--ema "$ema")
        acc=$("$dptrain" train --device cpu --dataset fashion-mnist --model "$model" --validation 10000 \
          --lot-size "$lot" --epochs "$epochs" --learning-rate "$lr" --momentum 0.9 --clip-norm 0.1 \
          --target-epsilon "$eps" --accountant prv --seed 1 --checkpoint-every 0 "${average[@]}" \
          --out-dir "$out/run" --overwrite --json 2>/dev/null |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["test_accuracy"])')
        echo "$model eps $eps lot $lot epochs $epochs lr $lr ema $ema validation $acc"
      done
    done
  done
done
