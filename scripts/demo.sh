#!/usr/bin/env bash
# The main job: a short DP-SGD run on Fashion-MNIST (one epoch of the MNIST tutorial CNN, epsilon
# calibrated to 3 at delta 1e-5) on the best available device, printing test accuracy and the
# epsilon with its guarantee label. Installs the dataset (Debian's dataset-fashion-mnist) and the
# Vulkan drivers wgpu needs when they are missing and we may install them. Extra arguments go to
# `dptrain train` (e.g. --device cpu, --epochs 3).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/dp-target}"
# Mesa's Vulkan loader wants a runtime dir when probing for a GPU; containers often lack one.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y dataset-fashion-mnist mesa-vulkan-drivers
    else
        echo "Fashion-MNIST is missing: sudo apt-get install dataset-fashion-mnist (or pass --data-dir DIR)" >&2
    fi
fi
cargo run --release --locked -- train --model mnist-cnn --epochs 1 --lot-size 256 --target-epsilon 3 --delta 1e-5 \
    --learning-rate 2 --clip-norm 0.1 --momentum 0.9 --out-dir runs/demo --overwrite "$@"
