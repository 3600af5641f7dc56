#!/usr/bin/env bash
# Every GPU figure from prepared calls (issue 37; docs/BENCHMARKS.md, "The GPU check"). A GPU
# machine is lent for minutes, with no network and no Rust toolchain, and a call carries at most
# 64 MiB: the CUDA binary is built here and packed with what the check needs into .gpu-check/
# (ignored by git), and the main job's data into .gpu-check-data/: together they are over the
# limit (the binary 39 MB, Fashion-MNIST 26 MB as xz), so they travel in two calls.
#
#   scripts/gpu-check.sh --prepare      # here: build the CUDA binary, pack both folders
#   scripts/gpu-check.sh --deadline 420 # GPU call 1 (carry .gpu-check, timeout 480 s): every
#                                       # phase but the main job, into $OUT
#   scripts/gpu-check.sh --phases main-job --deadline 200
#                                       # GPU call 2 at once after it, on the machine still warm
#                                       # (carry .gpu-check-data, timeout 240 s): the binary call 1
#                                       # unpacked
#   scripts/gpu-check.sh --dry-run --out DIR [--dptrain BIN] [gpu_check.py flags]
#                                       # here: the same steps on lavapipe and PyTorch's CPU
#
# .gpu-check/ holds dptrain.xz (the release binary with wgpu and CUDA, stripped), the opacus wheel
# (the machine has torch, not opacus) and Debian's Vulkan loader with the GL dispatch libraries
# (for wgpu, where the machine has only NVIDIA's driver); .gpu-check-data/ Fashion-MNIST as xz. DIR defaults to $OUT. Other flags
# go to scripts/gpu_check.py (--phases, --only, --rounds, --steps, --deadline).
set -euo pipefail
cd "$(dirname "$0")/.."
pack=.gpu-check
data=.gpu-check-data
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/dp-target}"
mode=run
out="${OUT:-gpu-check-out}"
dptrain=
rest=()
while [ $# -gt 0 ]; do
    case "$1" in
        --prepare) mode=prepare ;;
        --dry-run) mode=dry-run ;;
        --out) out="$2"; shift ;;
        --dptrain) dptrain="$2"; shift ;;
        *) rest+=("$1") ;;
    esac
    shift
done

# MiB a device call carries: the tracked files, and the folder $1.
carried_mib() {
    { git ls-files -z | xargs -0 stat -c %s 2>/dev/null; find "$1" -type f -printf '%s\n'; } \
        | awk '{s += $1} END {printf "%.1f", s / 1048576}'
}

if [ "$mode" = prepare ]; then
    command -v xz >/dev/null || { echo "error: xz is needed (apt-get install xz-utils)" >&2; exit 1; }
    # The binary the tests built (CUDA and the ndarray reference): nothing compiles after them.
    scripts/cargo-dptrain.sh build --release --locked --bin dptrain
    rm -rf "$pack" "$data" && mkdir -p "$pack" "$data"
    strip -o "$pack/dptrain" "$CARGO_TARGET_DIR/release/dptrain"
    # The x86 filter and a dictionary the size of the binary: 39 MB where plain xz -9 gives 40.
    xz --x86 --lzma2=preset=9e,dict=192MiB -T1 "$pack/dptrain"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: -d "$pack" opacus==1.6.0
    # The Vulkan loader, and the GL dispatch libraries NVIDIA's Vulkan driver (libGLX_nvidia) links:
    # a bare machine has the driver without them, and wgpu then finds no adapter.
    (cd "$pack" && apt-get -o APT::Sandbox::User=root download -qq libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2)
    source="${DPTRAIN_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}"
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
        if [ -f "$source/$f.gz" ]; then gzip -dc "$source/$f.gz"; else cat "$source/$f"; fi | xz -9e -T1 >"$data/$f.xz"
    done
    for folder in "$pack" "$data"; do
        mib=$(carried_mib "$folder")
        echo "a GPU call carrying $folder carries $mib MiB of at most 64"
        awk -v m="$mib" 'BEGIN {exit !(m <= 64)}' || { echo "error: $folder is over the 64 MiB a call carries" >&2; exit 1; }
    done
    exit 0
fi

mkdir -p "$out"
if [ "$mode" = dry-run ]; then
    dptrain="${dptrain:-$CARGO_TARGET_DIR/release/dptrain}"
    export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}" PYTHONUNBUFFERED=1
    lavapipe=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
    [ -f "$lavapipe" ] && export VK_ICD_FILENAMES="${VK_ICD_FILENAMES:-$lavapipe}"
    exec python3 scripts/gpu_check.py --dry-run --dptrain "$dptrain" --out "$out" "${rest[@]}"
fi

# On the GPU machine: the binary (unpacked once; a second call on the warm machine finds it), the
# Vulkan loader, the NVIDIA ICD, libdevice, opacus, and the main job's data where it was carried.
# xz files are unpacked by Python's lzma (python3 is there; the xz tool may not be).
unxz() {
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"
}
unpacked="$pack/unpacked"
mkdir -p "$unpacked"
if [ ! -x "$unpacked/dptrain" ]; then
    [ -f "$pack/dptrain.xz" ] || { echo "error: no dptrain here: carry $pack (scripts/gpu-check.sh --prepare), or call again while the machine that unpacked it is warm" >&2; exit 1; }
    unxz "$pack/dptrain.xz" "$unpacked/dptrain.part" && chmod +x "$unpacked/dptrain.part"
    mv "$unpacked/dptrain.part" "$unpacked/dptrain"
fi
if ! ldconfig -p | grep -q libvulkan.so.1 || ! ldconfig -p | grep -q libGLdispatch.so.0; then
    for f in "$pack"/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f "$icd" ] && ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* >/dev/null 2>&1; then
    export VK_DRIVER_FILES="$icd"
fi
# Burn's CUDA compiler links libdevice (the math functions) from a CUDA toolkit.
if [ -z "${CUDA_PATH:-}" ] && [ ! -d /usr/local/cuda/nvvm/libdevice ] && command -v nvcc >/dev/null; then
    export CUDA_PATH="$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")"
fi
if ls "$pack"/opacus-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$unpacked/site" "$pack"/opacus-*.whl
fi
export PYTHONPATH="$unpacked/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
data_args=()
if ls "$data"/*.xz >/dev/null 2>&1; then
    mkdir -p "$unpacked/fashion-mnist"
    for f in "$data"/*.xz; do unxz "$f" "$unpacked/fashion-mnist/$(basename "$f" .xz)"; done
    data_args=(--data-dir "$unpacked/fashion-mnist")
fi
exec python3 scripts/gpu_check.py --dptrain "$unpacked/dptrain" --out "$out" "${data_args[@]}" "${rest[@]}"
