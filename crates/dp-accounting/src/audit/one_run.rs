//! The one-run audit's bound (Steinke, Nasr and Jagielski 2023, Theorem 5.2 with the recursion of
//! their Algorithm 2 / reference code): m canaries are each included with probability 1/2; an
//! auditor that guesses r of them (abstaining on the rest) and gets v right refutes
//! (eps, delta)-DP at level beta when
//!   P[Binomial(r, q) >= v] + 2 m delta max_{1 <= i <= v} P[v - i <= Binomial(r, q) < v] / i <= beta,
//! with q = e^eps / (1 + e^eps), the accuracy of eps-DP randomized response.

use super::binomial::{pmf, survival};

/// The p-value of `v` or more correct guesses out of `r`, with `m` canaries, under the null
/// hypothesis that the mechanism is (`epsilon`, `delta`)-DP.
pub fn p_value(m: u64, r: u64, v: u64, epsilon: f64, delta: f64) -> f64 {
    debug_assert!(v <= r && r <= m);
    let q = 1.0 / (1.0 + (-epsilon).exp());
    let beta = survival(v, r, q);
    let (mut alpha, mut mass) = (0.0f64, 0.0);
    for i in 1..=v {
        mass += pmf(v - i, r, q);
        alpha = alpha.max(mass / i as f64);
    }
    (beta + alpha * delta * 2.0 * m as f64).min(1.0)
}

/// The largest epsilon that `v` correct guesses out of `r` (with `m` canaries) refute at
/// `confidence`: the mechanism is not (eps, delta)-DP for any smaller eps, except with probability
/// 1 - confidence. Zero when the guesses refute nothing.
pub fn epsilon_lower_bound(m: u64, r: u64, v: u64, delta: f64, confidence: f64) -> f64 {
    let beta = 1.0 - confidence;
    if r == 0 || p_value(m, r, v, 0.0, delta) >= beta {
        return 0.0;
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    while p_value(m, r, v, hi, delta) < beta {
        lo = hi;
        hi *= 2.0;
        if hi > 1e3 {
            return lo;
        }
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if p_value(m, r, v, mid, delta) < beta { lo = mid } else { hi = mid }
    }
    lo
}
