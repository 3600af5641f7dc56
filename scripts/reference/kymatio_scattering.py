"""Reference values of the 2-D scattering transform for kernels/tests/scattering_oracle.rs.

Run in a throwaway venv, never in CI:
    python3 -m venv /var/tmp/kym-venv && /var/tmp/kym-venv/bin/pip install kymatio==0.3.0 numpy "scipy<1.15"
    /var/tmp/kym-venv/bin/python scripts/reference/kymatio_scattering.py > kernels/tests/data/kymatio_scattering.json
"""
import json
import numpy as np
import scipy
import kymatio
from kymatio.numpy import Scattering2D


def image(kind, m, n):
    i, j = np.mgrid[0:m, 0:n].astype(np.float64)
    if kind == "texture":
        return ((i * 7 + j * 13) % 17) / 16.0
    if kind == "blob":
        return np.exp(-((i - 12) ** 2 + (j - 15) ** 2) / 40.0) + 0.3 * np.sin(i / 3.0) * np.cos(j / 4.0)
    return ((i * i + 3 * j) % 11) / 10.0


cases = []
for kind, (m, n) in [("texture", (28, 28)), ("blob", (28, 28)), ("ramp", (32, 32))]:
    x = image(kind, m, n)
    s = Scattering2D(J=2, shape=(m, n), L=8, max_order=2)(x[None])[0]
    cases.append({
        "kind": kind,
        "shape": [m, n],
        "image": x.ravel().tolist(),
        "output_shape": list(s.shape),
        "scattering": s.ravel().tolist(),
    })
print(json.dumps({
    "provenance": f"kymatio {kymatio.__version__} (numpy frontend, J=2, L=8, max_order=2), numpy {np.__version__}, scipy {scipy.__version__}; float64 input; scripts/reference/kymatio_scattering.py",
    "cases": cases,
}))
