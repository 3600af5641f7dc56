#!/usr/bin/env bash
# The mechanisms side by side on Fashion-MNIST (docs/RESULTS.md): gaussian (DP-SGD), ls-sgd
# (DP-LSSGD, s = 1) and optimized (sound, per-layer sigma) at epsilon 1 and 3 (delta 1e-5,
# certified), the same model, lot, epochs and optimiser as the main job. Prints one line per run;
# each run's report.json is in runs/mechanisms/<mechanism>-eps<e>/. Extra arguments go to every run
# (e.g. --epochs 3, --device wgpu).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/dp-target}"
# Mesa's Vulkan loader wants a runtime dir when probing for a GPU; containers often lack one.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
# The one feature set the tests and the main job build (scripts/cargo-dptrain.sh): nothing rebuilt.
scripts/cargo-dptrain.sh build --release --locked --bin dptrain
for eps in 1 3; do
    for mechanism in gaussian ls-sgd optimized; do
        out="runs/mechanisms/${mechanism}-eps${eps}"
        printf '%-10s epsilon %s: ' "$mechanism" "$eps"
        "$CARGO_TARGET_DIR/release/dptrain" train --model mnist-cnn --epochs 1 --lot-size 256 \
            --target-epsilon "$eps" --delta 1e-5 --learning-rate 2 --clip-norm 0.1 --momentum 0.9 \
            --mechanism "$mechanism" --out-dir "$out" "$@" 2>/dev/null | grep '^test accuracy'
    done
done
