"""Reference epsilons of BandMF with cyclic Poisson sampling (crates/dp-accounting/tests/bandmf_reference.rs).

Run in a throwaway virtual environment (never in CI):

    python3 -m venv /tmp/jaxp && /tmp/jaxp/bin/pip install jax-privacy==2.0.0
    /tmp/jaxp/bin/python scripts/reference/bandmf_accounting.py crates/dp-accounting/tests/data/bandmf_accounting.json

jax-privacy 2.0.0's `DpsgdTrainingAccountant` with `cycle_length` = bands: ceil(steps / bands)
Poisson-sampled Gaussians at rate lot / floor(examples / bands), accounted by dp_accounting
0.6.0's RDP accountant (jax-privacy's default orders) and PLD accountant (its defaults).
"""

import json
import sys

from jax_privacy.accounting import accountants, analysis

CASES = [
    (60000, 256, 2000, 1.0, 1, 1e-5),
    (60000, 256, 2000, 1.0, 4, 1e-5),
    (60000, 256, 2000, 0.8, 16, 1e-5),
    (60000, 512, 3000, 1.2, 64, 1e-5),
    (50000, 1000, 1000, 2.0, 8, 1e-6),
    (10000, 100, 500, 0.9, 3, 1e-5),
]

out = []
for examples, lot, steps, z, bands, delta in CASES:
    row = {"examples": examples, "lot": lot, "steps": steps, "noise_multiplier": z, "bands": bands, "delta": delta}
    for name, config in [("rdp", accountants.RdpAccountantConfig()), ("pld", accountants.PldAccountantConfig())]:
        params = analysis.DpParams(
            noise_multipliers=z, num_samples=examples, batch_size=lot, delta=delta, cycle_length=bands
        )
        row[name] = float(analysis.DpsgdTrainingAccountant(config).compute_epsilon(steps, params))
    out.append(row)
with open(sys.argv[1], "w") as f:
    json.dump({"provenance": "jax-privacy 2.0.0 DpsgdTrainingAccountant(cycle_length), dp_accounting 0.6.0", "cases": out}, f, indent=1)
