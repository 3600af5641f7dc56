#!/usr/bin/env bash
# Runs a command (a cargo build of `--features cuda`) with the LLVM that Burn's CUDA backend is
# compiled against, installed from PyPI alone. cubecl-cuda lowers kernels through cubecl-llvm's
# NVPTX backend, whose build script (tracel-llvm-bundler) would download a prebuilt LLVM 23.1 from
# GitHub into `<XDG_DATA_HOME>/tracel/tracel-llvm-23.1.0-4` unless a marker file says one is
# installed there. This script installs the relocatable static LLVM 23.1 of PyPI's
# mlc-llvm-static (with its NVPTX target, hashes pinned) into a cache folder outside the
# repository, lays that folder out as the bundler expects, and runs the command with
# XDG_DATA_HOME pointing there, so nothing is fetched from GitHub (docs/BENCHMARKS.md, "CUDA").
#
#   scripts/with-cuda-llvm.sh cargo build --release --locked --features cuda
#
# DPTRAIN_LLVM_DIR chooses the folder (default: ~/.cache/dptrain/llvm-23.1.1, about 400 MB).
# CUDARC_CUDA_VERSION pins the CUDA API the bindings are generated for: unless set, the newest
# 13.0, or older where the NVIDIA driver on this machine (nvidia-smi) runs only an older one. The binary loads the
# driver at run time: it builds without a driver or a CUDA toolkit.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...] (e.g. cargo build --release --features cuda)" >&2; exit 2; }
dir="${DPTRAIN_LLVM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dptrain/llvm-23.1.1}"
bundle="$dir/data/tracel/tracel-llvm-23.1.0-4"
if [ ! -f "$bundle/.tracel-llvm-installed" ]; then
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null \
        || { echo "error: LLVM's llvm-config from PyPI needs python3 >= 3.10 on PATH" >&2; exit 1; }
    echo "Installing LLVM 23.1 (static, NVPTX) from PyPI into $dir for Burn's CUDA compiler (once, about 90 MB to download)" >&2
    # Only what this script made is removed (an interrupted install is redone from scratch).
    rm -rf "$dir/pkg" "$dir/data/tracel"
    mkdir -p "$dir/data/tracel"
    requirements="$dir/requirements.txt"
    cat >"$requirements" <<'EOF'
mlc-llvm-static==23.1.1.post0 --hash=sha256:dcfec888abfaa418be77d41af585805f31463584cf9c90582992c00f392c1ac5
mlc-llvm-static-extra-targets==23.1.1.post0 --hash=sha256:c36e834d9a4e9cf9759f27fece65711ece7a2fc2b5a96dbb15d66f5e9e787929
EOF
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --require-hashes --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --python-version 3.10 --target "$dir/pkg" -r "$requirements"
    static="$dir/pkg/mlc_llvm_static/static"
    chmod +x "$static/bin/llvm-config"
    "$static/bin/llvm-config" --link-static --targets-built | grep -qw NVPTX \
        || { echo "error: the LLVM in $static has no NVPTX target" >&2; exit 1; }
    ln -sfn "$static" "$bundle"
    touch "$bundle/.tracel-llvm-installed"
fi
export XDG_DATA_HOME="$dir/data"
if [ -z "${CUDARC_CUDA_VERSION:-}" ]; then
    CUDARC_CUDA_VERSION=13000
    driver=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\)\.\([0-9]*\).*/\1 \2/p' | head -n 1 || true)
    if [ -n "$driver" ]; then
        read -r major minor <<<"$driver"
        # 13.0 (what CI builds, so a driver that runs it shares CI's build), else the newest of
        # the older bindings cudarc 0.19 knows that the driver runs.
        for v in 13000 12090 12080 12060 12050 12040 12030 12020 12010 12000; do
            if [ "$v" -le $((major * 1000 + minor * 10)) ]; then CUDARC_CUDA_VERSION=$v; break; fi
        done
    fi
    export CUDARC_CUDA_VERSION
fi
exec "$@"
