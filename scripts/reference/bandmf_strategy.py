"""Reference values for dp-kernels' banded Toeplitz strategy (kernels/tests/banded_strategy_reference.rs).

Run in a throwaway virtual environment (never in CI):

    python3 -m venv /tmp/jaxp && /tmp/jaxp/bin/pip install jax-privacy==2.0.0
    /tmp/jaxp/bin/python scripts/reference/bandmf_strategy.py kernels/tests/data/bandmf_strategy.json

jax-privacy 2.0.0's `optimize_banded_toeplitz` (its default: mean squared prefix-sum error, 250
L-BFGS steps from Fichtenberger et al.'s coefficients), float64; `loss` is its mean per-query
error times the sensitivity ||c||^2 (the coefficients it returns have norm 1).
"""

import json
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax_privacy.matrix_factorization import toeplitz  # noqa: E402

out = []
for n, b in [(16, 4), (100, 2), (256, 8), (500, 16), (1000, 32), (2000, 8), (2000, 64)]:
    c = toeplitz.optimize_banded_toeplitz(n, b)
    out.append({
        "steps": n,
        "bands": b,
        "loss": float(toeplitz.loss(c, n)),
        "column_norm": float(jnp.linalg.norm(c)),
        "coefficients": [float(x) for x in c],
    })
with open(sys.argv[1], "w") as f:
    json.dump({"provenance": "jax-privacy 2.0.0 optimize_banded_toeplitz, jax 0.10.2, float64", "strategies": out}, f, indent=1)
