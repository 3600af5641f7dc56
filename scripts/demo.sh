#!/usr/bin/env bash
# The main job: a short DP-SGD run on Fashion-MNIST (Tramèr & Boneh's ScatterNet features, computed
# once and cached, and a linear head; epsilon calibrated to 3 at delta 1e-5 under the PRV
# accountant; parameter averaging) on the best available device (CUDA on an NVIDIA machine, else Vulkan, else the CPU), printing test accuracy and the
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
# The smallest build that runs on the best device here: Burn's CUDA backend beside wgpu and the CPU
# where an NVIDIA driver is (its LLVM from PyPI, scripts/with-cuda-llvm.sh); the default features,
# wgpu and the CPU, where another GPU may be (a render node in /dev/dri, or not Linux); else the CPU
# alone (`--no-default-features`: no CubeCL, wgpu or kernel cache to compile). No CUDA and no
# ndarray unless needed: docs/BENCHMARKS.md, "The release build". `auto` then picks CUDA, else a
# hardware GPU through wgpu, else the CPU.
run=(cargo run)
if [ -e /proc/driver/nvidia/version ] || nvidia-smi -L >/dev/null 2>&1; then
    run=(scripts/with-cuda-llvm.sh cargo run --features cuda)
elif [ "$(uname -s)" = Linux ] && ! compgen -G '/dev/dri/renderD*' >/dev/null; then
    run=(cargo run --no-default-features)
fi
"${run[@]}" --release --locked --bin dptrain -- train --model scatnet-linear --epochs 40 --lot-size 8192 --target-epsilon 3 \
    --delta 1e-5 --accountant prv --learning-rate 16 --momentum 0.9 --clip-norm 0.1 --ema 0.999 \
    --out-dir runs/demo --overwrite "$@"
