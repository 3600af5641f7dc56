"""Reference values for the audit bounds in dp-accounting (crates/dp-accounting/tests/audit_reference.rs).

Run in a throwaway virtual environment (never in CI):

    python3 -m venv /tmp/auditvenv && /tmp/auditvenv/bin/pip install scipy
    /tmp/auditvenv/bin/python scripts/reference/audit.py > crates/dp-accounting/tests/data/audit.json

The one-run p-value is the published code of Steinke, Nasr and Jagielski, "Privacy Auditing with
One (1) Training Run" (NeurIPS 2023, arXiv:2305.08846, Appendix: p_value_DP_audit), on scipy's
binomial; its epsilon bound is found here with scipy's brentq (not by bisection as in the crate).
Clopper-Pearson bounds are scipy's beta quantiles.
"""

import json
import math

import scipy.optimize
import scipy.stats


def p_value_dp_audit(m, r, v, eps, delta):
    # Steinke, Nasr, Jagielski 2023, Appendix, verbatim logic.
    assert 0 <= v <= r <= m
    q = 1 / (1 + math.exp(-eps))
    beta = scipy.stats.binom.sf(v - 1, r, q)
    alpha = 0
    total = 0
    for i in range(1, v + 1):
        total = total + scipy.stats.binom.pmf(v - i, r, q)
        if total > i * alpha:
            alpha = total / i
    return min(beta + alpha * delta * 2 * m, 1)


def eps_lower_bound(m, r, v, delta, confidence):
    target = 1 - confidence
    f = lambda e: p_value_dp_audit(m, r, v, e, delta) - target
    if f(0.0) >= 0:
        return 0.0
    hi = 1.0
    while f(hi) < 0:
        hi *= 2
    return scipy.optimize.brentq(f, 0.0, hi, xtol=1e-12)


def cp_upper(k, n, confidence):
    return 1.0 if k >= n else float(scipy.stats.beta.ppf(confidence, k + 1, n - k))


def multi_run(fp, neg, fn, pos, delta, confidence):
    each = 1 - (1 - confidence) / 2
    fpr, fnr = cp_upper(fp, neg, each), cp_upper(fn, pos, each)
    b = lambda a, c: math.log((1 - delta - a) / c) if c > 0 and 1 - delta - a > 0 else 0.0
    return max(b(fnr, fpr), b(fpr, fnr), 0.0)


p_values = [(m, r, v, e, d) for (m, r, v) in [(1000, 100, 80), (1000, 200, 150), (5000, 500, 400), (100, 20, 20)]
            for e in [0.5, 1.0, 2.0] for d in [0.0, 1e-5]]
bounds = [(1000, 100, 80, 1e-5, 0.95), (1000, 200, 150, 0.0, 0.95), (1000, 1000, 1000, 1e-5, 0.95),
          (5000, 1000, 700, 1e-5, 0.95), (1000, 100, 50, 1e-5, 0.95), (10000, 2000, 1400, 1e-5, 0.99)]
cps = [(0, 100, 0.95), (5, 100, 0.95), (50, 100, 0.975), (999, 1000, 0.95), (3, 10, 0.5)]
multi = [(3, 500, 10, 500, 1e-5, 0.95), (0, 1000, 0, 1000, 1e-5, 0.95), (200, 500, 240, 500, 1e-5, 0.95)]

print(json.dumps({
    "provenance": "scripts/reference/audit.py with scipy " + scipy.__version__,
    "p_value": [dict(m=m, r=r, v=v, epsilon=e, delta=d, p=p_value_dp_audit(m, r, v, e, d)) for m, r, v, e, d in p_values],
    "epsilon_lower_bound": [dict(m=m, r=r, v=v, delta=d, confidence=c, epsilon=eps_lower_bound(m, r, v, d, c))
                            for m, r, v, d, c in bounds],
    "clopper_pearson_upper": [dict(k=k, n=n, confidence=c, upper=cp_upper(k, n, c)) for k, n, c in cps],
    "multi_run": [dict(false_positives=a, negatives=b, false_negatives=c, positives=d, delta=e, confidence=f,
                       epsilon=multi_run(a, b, c, d, e, f)) for a, b, c, d, e, f in multi],
}, indent=1))
