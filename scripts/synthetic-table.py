#!/usr/bin/env python3
"""Writes a synthetic CSV table for timing `dptrain erm --device` on more rows than the real data
sets here have: N rows of D standard-normal features, labels from K random linear scores plus
Gaussian noise (argmax; K = 2 gives a 0/1 label), header f0..f{D-1},label.

Usage: scripts/synthetic-table.py N D K SEED OUT.csv
"""
import random
import sys


def main() -> None:
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    n, d, k, seed = (int(v) for v in sys.argv[1:5])
    rng = random.Random(seed)
    weights = [[rng.gauss(0, 1) for _ in range(d)] for _ in range(k)]
    with open(sys.argv[5], "w") as out:
        out.write(",".join(f"f{j}" for j in range(d)) + ",label\n")
        for _ in range(n):
            x = [rng.gauss(0, 1) for _ in range(d)]
            scores = [sum(w * v for w, v in zip(row, x)) + rng.gauss(0, 2) for row in weights]
            out.write(",".join(f"{v:.4f}" for v in x) + f",{scores.index(max(scores))}\n")


if __name__ == "__main__":
    main()
