#!/usr/bin/env bash
# DP fine-tuning without public data (issue 42, item 5): pretrain the zoo's mnist-cnn without
# privacy on synthetic dead-leaves images dptrain generates itself (`dptrain data synth`: no real
# example is involved, so the pretraining costs no privacy), then DP-SGD on Fashion-MNIST at a
# certified epsilon from those weights (all layers trained, and with the convolutions frozen),
# beside the same run from a random initialisation. Prints one line per run; every run folder is
# kept under OUT.
#   scripts/synthetic-pretraining.sh [OUT]
# EPSILONS, SEEDS, EPOCHS, LOT, PER_CLASS and PRETRAIN_EPOCHS change the protocol.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/dp-target}"
dptrain="${DPTRAIN:-$CARGO_TARGET_DIR/release/dptrain}"
[ -n "${DPTRAIN:-}" ] || scripts/cargo-dptrain.sh build --release --locked --bin dptrain >&2
out="${1:-runs/synthetic-pretraining}"
mkdir -p "$out"
report() { python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.2f%% epsilon %s (%s) %.0f s" % (100 * r["test_accuracy"], r["epsilon"], r["guarantee"], r["seconds"]))'; }

# 1. Synthetic images and the pretraining (mechanism none: it reads no private example).
[ -d "$out/leaves" ] || "$dptrain" data synth "$out/leaves" --per-class "${PER_CLASS:-2000}" --shape 1x28x28 --seed 0
if [ ! -f "$out/pretrained/model.safetensors" ]; then
  echo "pretraining: $("$dptrain" train --device cpu --dataset image-folder --data-dir "$out/leaves" \
    --image-shape 1x28x28 --model mnist-cnn --mechanism none --lot-size 256 --epochs "${PRETRAIN_EPOCHS:-20}" \
    --learning-rate 0.05 --momentum 0.9 --seed 1 --checkpoint-every 0 --out-dir "$out/pretrained" --overwrite \
    --json 2>/dev/null | report) (synthetic test accuracy)"
fi

# 2. DP-SGD on Fashion-MNIST: from scratch, from the synthetic weights, and with the convolutions frozen.
for eps in ${EPSILONS:-3 1}; do
  for seed in ${SEEDS:-1 2 3}; do
    for start in scratch pretrained frozen; do
      init=()
      [ "$start" = scratch ] || init=(--init-from "$out/pretrained/model.safetensors")
      [ "$start" = frozen ] && init+=(--freeze '^convs\.')
      line=$("$dptrain" train --device cpu --dataset fashion-mnist --model mnist-cnn --epochs "${EPOCHS:-10}" \
        --lot-size "${LOT:-2048}" --batch-size 512 --target-epsilon "$eps" --delta 1e-5 --clip-norm 0.1 \
        --learning-rate 4 --momentum 0.9 --seed "$seed" --checkpoint-every 0 "${init[@]}" \
        --out-dir "$out/eps$eps-$start-s$seed" --overwrite --json 2>/dev/null | report)
      echo "eps $eps seed $seed $start: $line"
    done
  done
done
