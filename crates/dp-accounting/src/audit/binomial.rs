//! The binomial distribution in f64 through log-gamma: probabilities for up to millions of trials,
//! and the Clopper-Pearson upper confidence bound on a proportion.

/// ln P[Binomial(n, p) = k].
pub fn ln_pmf(k: u64, n: u64, p: f64) -> f64 {
    if k > n {
        return f64::NEG_INFINITY;
    }
    let (k_f, n_f) = (k as f64, n as f64);
    let choose = libm::lgamma(n_f + 1.0) - libm::lgamma(k_f + 1.0) - libm::lgamma(n_f - k_f + 1.0);
    let term = |count: f64, prob: f64| if count == 0.0 { 0.0 } else { count * prob.ln() };
    choose + term(k_f, p) + term(n_f - k_f, 1.0 - p)
}

/// P[Binomial(n, p) = k].
pub fn pmf(k: u64, n: u64, p: f64) -> f64 {
    ln_pmf(k, n, p).exp()
}

/// P[Binomial(n, p) >= k].
pub fn survival(k: u64, n: u64, p: f64) -> f64 {
    (k..=n).map(|j| pmf(j, n, p)).sum::<f64>().min(1.0)
}

/// P[Binomial(n, p) <= k].
pub fn cdf(k: u64, n: u64, p: f64) -> f64 {
    (0..=k.min(n)).map(|j| pmf(j, n, p)).sum::<f64>().min(1.0)
}

/// The one-sided Clopper-Pearson upper bound on a proportion from `k` successes in `n` trials:
/// the p with P[Binomial(n, p) <= k] = 1 - confidence (1 when k = n). It exceeds the true
/// proportion with probability at least `confidence`.
pub fn clopper_pearson_upper(k: u64, n: u64, confidence: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    let alpha = 1.0 - confidence;
    let (mut lo, mut hi) = (k as f64 / n as f64, 1.0);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if cdf(k, n, mid) > alpha { lo = mid } else { hi = mid }
    }
    hi
}
