#!/usr/bin/env bash
# Real tabular data for `dptrain erm`: Breast Cancer Wisconsin (569 rows, 30 features, 2 classes)
# and Iris (150 rows, 4 features, 3 classes) ship inside scikit-learn's wheel. This downloads the
# wheel from PyPI without installing it (pip download), extracts the two tables and rewrites
# scikit-learn's first line (row count, feature count, class names) as a CSV header with named
# classes. Output: ${1:-data/tabular}/{breast_cancer,iris}.csv. Needs python3 with pip.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-data/tabular}"
cache="${DPTRAIN_WHEEL_CACHE:-/var/tmp/dp-wheels}"
if [ -s "$out/breast_cancer.csv" ] && [ -s "$out/iris.csv" ]; then
    echo "tabular data already in $out"
    exit 0
fi
mkdir -p "$out" "$cache"
wheel=$(ls "$cache"/scikit_learn-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$cache" scikit-learn
    wheel=$(ls "$cache"/scikit_learn-*.whl | head -n 1)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$wheel" "$tmp" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    for name in ("breast_cancer.csv", "iris.csv"):
        wheel.extract("sklearn/datasets/data/" + name, sys.argv[2])
PY
# scikit-learn's first line is "n,d,class0,class1,...": turn it into a header, and the numeric
# labels of the last column into class names.
convert() {
    local src="$1" dst="$2" names="$3"
    awk -F, -v names="$names" 'NR == 1 {
            d = $2; for (k = 3; k <= NF; k++) cls[k - 3] = $k
            if (names == "") { for (j = 1; j <= d; j++) printf "x%d,", j } else printf "%s,", names
            print "target"; next }
        { for (j = 1; j < NF; j++) printf "%s,", $j; print cls[$NF] }' "$src" > "$dst"
}
convert "$tmp/sklearn/datasets/data/breast_cancer.csv" "$out/breast_cancer.csv" ""
convert "$tmp/sklearn/datasets/data/iris.csv" "$out/iris.csv" "sepal_length,sepal_width,petal_length,petal_width"
echo "wrote $out/breast_cancer.csv ($(($(wc -l < "$out/breast_cancer.csv") - 1)) rows) and $out/iris.csv ($(($(wc -l < "$out/iris.csv") - 1)) rows)"
