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

/// The sum of P[Binomial(n, p) = j] from j = `start` away from the mode (down when `downward`),
/// where the terms only shrink: each term from the last by the pmf's ratio, stopping once they no
/// longer change the sum. Costs about the tail's width, not its length.
fn tail(start: u64, n: u64, p: f64, downward: bool) -> f64 {
    let (mut term, mut j) = (pmf(start, n, p), start);
    let mut sum = term;
    let odds = p / (1.0 - p);
    loop {
        if downward {
            if j == 0 {
                break;
            }
            term *= j as f64 / (n - j + 1) as f64 / odds;
            j -= 1;
        } else {
            if j == n {
                break;
            }
            term *= (n - j) as f64 / (j + 1) as f64 * odds;
            j += 1;
        }
        sum += term;
        if term <= sum * 1e-18 {
            break;
        }
    }
    sum.min(1.0)
}

/// The mode floor((n + 1) p): below it the pmf rises, above it it falls.
fn mode(n: u64, p: f64) -> u64 {
    ((n as f64 + 1.0) * p).floor() as u64
}

/// P[Binomial(n, p) >= k].
pub fn survival(k: u64, n: u64, p: f64) -> f64 {
    if k == 0 || p >= 1.0 {
        return if k <= n { 1.0 } else { 0.0 };
    }
    if k > n || p <= 0.0 {
        return 0.0;
    }
    if k > mode(n, p) { tail(k, n, p, false) } else { (1.0 - tail(k - 1, n, p, true)).max(0.0) }
}

/// P[Binomial(n, p) <= k].
pub fn cdf(k: u64, n: u64, p: f64) -> f64 {
    if k >= n || p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return 0.0;
    }
    if k < mode(n, p) { tail(k, n, p, true) } else { (1.0 - tail(k + 1, n, p, false)).max(0.0) }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_match_the_full_sums_of_the_pmf() {
        for (n, p) in [(1u64, 0.3), (10, 0.5), (57, 0.02), (400, 0.73), (3000, 0.999), (20000, 1e-4)] {
            for k in [0, 1, n / 7, n / 3, n / 2, (n as f64 * p) as u64, n - 1, n] {
                let full_cdf: f64 = (0..=k).map(|j| pmf(j, n, p)).sum::<f64>().min(1.0);
                let full_survival: f64 = (k..=n).map(|j| pmf(j, n, p)).sum::<f64>().min(1.0);
                // ln_pmf subtracts log-gammas of size n ln n, so each pmf is itself good to about
                // n ln n * 1e-16 relative: 1e-10 is what both sums can promise at n = 20,000.
                let close = |a: f64, b: f64| (a - b).abs() <= 1e-10 * b.max(1e-300) || (a - b).abs() < 1e-14;
                assert!(close(cdf(k, n, p), full_cdf), "cdf({k}, {n}, {p}) = {} vs {full_cdf}", cdf(k, n, p));
                assert!(close(survival(k, n, p), full_survival), "survival({k}, {n}, {p})");
            }
        }
    }
}
