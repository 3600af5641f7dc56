#!/usr/bin/env bash
# A library user's crate, made from the README: a new cargo project whose [dependencies] are the
# README's lines (the git source replaced by this checkout, and with `--cpu` every dp-train crate
# at `default-features = false`), whose main.rs is crates/dp-run/examples/burn_cnn.rs, built cold
# into its own target folder with `cargo build --release --timings` (docs/BENCHMARKS.md, "A
# library user's build"). Prints the build's wall time and where the timings report is.
#
#   scripts/user-crate.sh --cpu /var/tmp/user-crate     # the CPU-only user's crate
set -euo pipefail
cd "$(dirname "$0")/.."
cpu=false
if [ "${1:-}" = --cpu ]; then cpu=true; shift; fi
dir=${1:?usage: scripts/user-crate.sh [--cpu] DIR}
checkout=$(pwd)
rm -rf "$dir" && mkdir -p "$dir/src"
cp crates/dp-run/examples/burn_cnn.rs "$dir/src/main.rs"
cp Cargo.lock "$dir/Cargo.lock"
python3 - "$checkout" "$cpu" >"$dir/Cargo.toml" <<'PY'
import re, sys
checkout, cpu = sys.argv[1], sys.argv[2] == "true"
readme = open(f"{checkout}/README.md").read()
block = re.search(r"```toml\n(\[dependencies\]\n.*?)```", readme, re.S).group(1)
paths = {"dp-engine": "crates/dp-engine", "dp-run": "crates/dp-run", "dp-data": "crates/dp-data"}
out = []
for line in block.splitlines():
    name = line.split("=")[0].strip()
    if name in paths:
        features = ", default-features = false" if cpu else ""
        line = f'{name} = {{ path = "{checkout}/{paths[name]}"{features} }}'
    out.append(line)
print('[package]\nname = "user-cnn"\nversion = "0.1.0"\nedition = "2024"\n')
print("\n".join(out))
PY
cd "$dir"
start=$(date +%s)
CARGO_TARGET_DIR="$dir/target" cargo build --release --timings --quiet
echo "cold release build of $dir: $(( $(date +%s) - start )) s on $(nproc) threads; timings: $dir/target/cargo-timings/cargo-timing.html"
