#!/usr/bin/env bash
# The Burn user's CNN (crates/dp-run/examples/burn_cnn.rs: burn-nn layers, a Burn Dataset and
# Batcher, `Run`) against the same CNN trained by Opacus, two epochs of DP-SGD on Fashion-MNIST
# at the noise multiplier dp-train calibrated for epsilon 3, one after the other on this machine
# (docs/BENCHMARKS.md, "A Burn user's CNN"). dp-train runs twice: as the program is, and with
# glibc told by GLIBC_TUNABLES what `dp_engine::host::keep_freed_memory` tells it, so that any
# difference the allocator line would make shows. torch and opacus come from PyPI into a
# throwaway virtual environment (never a dependency of the repository or of CI).
#
#   scripts/burn-cnn-vs-opacus.sh            # prints one JSON line per run, then the ratios
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/dp-target}"
venv=$(scripts/bench-venv.sh)
scripts/cargo-dptrain.sh build --release --locked --quiet --workspace --examples
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# What keep_freed_memory sets: blocks up to 1 GiB from the heap, the heap never trimmed.
kept="glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=18446744073709551615"
for allocator in default kept; do
    (cd "$work" && rm -rf runs && if [ $allocator = kept ]; then export GLIBC_TUNABLES=$kept; fi &&
        BURN_DEVICE=flex "$CARGO_TARGET_DIR/release/examples/burn_cnn" >/dev/null 2>&1)
    python3 - "$work/runs/burn-cnn/report.json" "$allocator" >>"$work/runs.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
keys = ("seconds", "test_accuracy", "noise_multiplier")
print(json.dumps({"run": f"dp-train ({sys.argv[2]} allocator)", **{k: r[k] for k in keys}}))
PY
done
z=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['noise_multiplier'])" "$work/runs.jsonl")
"$venv/bin/python" -W ignore scripts/burn_cnn_opacus.py --noise-multiplier "$z" >>"$work/runs.jsonl"
cat "$work/runs.jsonl"
python3 - "$work/runs.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
opacus = rows[-1]["seconds"]
for r in rows[:-1]:
    print(f"{r['run']}: {r['seconds']:.1f} s, {100 * r['test_accuracy']:.2f}%; / Opacus {opacus:.1f} s = {r['seconds'] / opacus:.2f}")
PY
