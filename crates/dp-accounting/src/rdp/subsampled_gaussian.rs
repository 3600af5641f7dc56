//! Rényi DP of one step of the Poisson-subsampled Gaussian mechanism (Mironov, Talwar, Zhang 2019).
//!
//! With mu0 = N(0, z^2), mu1 = N(1, z^2) and mu = (1-q) mu0 + q mu1, the RDP of order alpha is
//! ln(A_alpha) / (alpha - 1) with A_alpha = E_{x~mu0}[(mu(x)/mu0(x))^alpha] (add/remove adjacency;
//! this ordering dominates the other one, MTZ19 Theorem 5). Integer orders use the exact binomial
//! expansion (Section 3.3), fractional orders the two-sided convergent series (Section 3.3), both in
//! log space so that neither overflows for large orders or small noise.

use crate::error::{AccountingError, Result};
use crate::special::{log_add, log_erfc, log_sub, log1mexp};
use std::f64::consts::SQRT_2;

/// The order grid of Opacus and TF Privacy: 1.1, 1.2, ..., 10.9 and 12, 13, ..., 63.
pub fn standard_orders() -> Vec<f64> {
    let mut orders: Vec<f64> = (1..100).map(|x| 1.0 + f64::from(x) / 10.0).collect();
    orders.extend((12..64).map(f64::from));
    orders
}

/// The standard grid plus orders near 1 and up to 4096, so that epsilons from 0.01 to 100 are not
/// limited by the grid's ends (the standard grid cannot certify epsilon < ~0.1 at delta = 1e-5).
pub fn extended_orders() -> Vec<f64> {
    let mut orders = vec![1.01, 1.02, 1.05];
    orders.extend(standard_orders());
    orders.extend([
        64.0, 80.0, 96.0, 112.0, 128.0, 160.0, 192.0, 224.0, 256.0, 320.0, 384.0, 448.0, 512.0, 640.0, 768.0, 1024.0,
        1536.0, 2048.0, 3072.0, 4096.0,
    ]);
    orders
}

/// RDP of order `alpha` (> 1) of one step with noise multiplier `z` and sampling rate `q` in (0, 1].
pub fn subsampled_gaussian_rdp(q: f64, z: f64, alpha: f64) -> Result<f64> {
    if !(alpha > 1.0 && alpha.is_finite()) {
        return Err(AccountingError::InvalidParameter {
            name: "RDP order",
            value: alpha.to_string(),
            requirement: "must be a finite number > 1",
        });
    }
    if q >= 1.0 {
        return Ok(alpha / (2.0 * z * z));
    }
    if alpha.fract() == 0.0 {
        return Ok(log_a_integer(q, z, alpha) / (alpha - 1.0));
    }
    match log_a_fractional(q, z, alpha) {
        Ok(log_a) => Ok(log_a / (alpha - 1.0)),
        // Near q = 1/2 with large z the series' tail decays only polynomially. RDP is
        // non-decreasing in the order, so the integer order above is a sound (conservative) value.
        Err(AccountingError::Numerical(_)) => {
            let above = alpha.ceil();
            Ok(log_a_integer(q, z, above) / (above - 1.0))
        }
        Err(e) => Err(e),
    }
}

/// ln A_alpha for integer alpha. The terms i = 0, 1 of the binomial expansion sum with the rest of
/// the binomial probabilities to 1, so A - 1 = sum_{i>=2} C(alpha, i) q^i (1-q)^(alpha-i)
/// (exp((i^2 - i) / (2 z^2)) - 1): all terms positive, no cancellation even when A - 1 ~ 1e-12.
fn log_a_integer(q: f64, z: f64, alpha: f64) -> f64 {
    let n = alpha as u64;
    let (ln_q, ln_1mq) = (q.ln(), (-q).ln_1p());
    let mut log_binom = 0.0; // ln C(n, i), updated incrementally
    let mut log_a_minus_1 = f64::NEG_INFINITY;
    for i in 1..=n {
        let fi = i as f64;
        log_binom += ((n - i + 1) as f64).ln() - fi.ln();
        if i < 2 {
            continue;
        }
        let c = (fi * fi - fi) / (2.0 * z * z);
        let term = log_binom + fi * ln_q + (alpha - fi) * ln_1mq + c + log1mexp(c);
        log_a_minus_1 = log_add(log_a_minus_1, term);
    }
    log_add(0.0, log_a_minus_1)
}

/// ln A_alpha for fractional alpha via the series split at z0 = z^2 ln(1/q - 1) + 1/2.
fn log_a_fractional(q: f64, z: f64, alpha: f64) -> Result<f64> {
    const MAX_TERMS: u32 = 1_000_000;
    let (ln_q, ln_1mq) = (q.ln(), (-q).ln_1p());
    let z0 = z * z * (1.0 / q - 1.0).ln() + 0.5;
    let (mut log_a0, mut log_a1) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    // Binomial coefficient C(alpha, i) tracked as ln|C| and its sign.
    let (mut log_coef, mut positive) = (0.0f64, true);
    for i in 0..MAX_TERMS {
        let fi = f64::from(i);
        if i > 0 {
            let factor = (alpha - fi + 1.0) / fi;
            log_coef += factor.abs().ln();
            if factor < 0.0 {
                positive = !positive;
            }
        }
        let j = alpha - fi;
        let log_t0 = log_coef + fi * ln_q + j * ln_1mq;
        let log_t1 = log_coef + j * ln_q + fi * ln_1mq;
        let log_e0 = 0.5f64.ln() + log_erfc((fi - z0) / (SQRT_2 * z));
        let log_e1 = 0.5f64.ln() + log_erfc((z0 - j) / (SQRT_2 * z));
        let log_s0 = log_t0 + (fi * fi - fi) / (2.0 * z * z) + log_e0;
        let log_s1 = log_t1 + (j * j - j) / (2.0 * z * z) + log_e1;
        if positive {
            log_a0 = log_add(log_a0, log_s0);
            log_a1 = log_add(log_a1, log_s1);
        } else {
            log_a0 = log_sub(log_a0, log_s0);
            log_a1 = log_sub(log_a1, log_s1);
        }
        if log_a0.is_nan() || log_a1.is_nan() {
            return Err(AccountingError::Numerical(format!(
                "the RDP series for order {alpha} lost precision (q = {q}, noise multiplier = {z})"
            )));
        }
        // Past alpha the terms alternate and shrink (polynomially in the tail, so the remainder is
        // within a small factor of the last term); A_alpha >= 1, so a term below e^-40 is beyond
        // f64 resolution.
        if fi > alpha && log_s0.max(log_s1) < -40.0 {
            return Ok(log_add(log_a0, log_a1));
        }
    }
    Err(AccountingError::Numerical(format!("the RDP series for order {alpha} did not converge")))
}

/// The two published ways to turn an RDP curve into an (epsilon, delta) guarantee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Conversion {
    /// Balle et al. 2020, Theorem 21: eps = rdp + ln((a-1)/a) - (ln delta + ln a)/(a-1). Tighter.
    Balle2020,
    /// Mironov 2017, Proposition 3: eps = rdp + ln(1/delta)/(a-1).
    Classic,
}

impl Conversion {
    /// Epsilon at `delta` from RDP value `rdp` at order `alpha`, clamped at 0 (a guarantee with
    /// a negative epsilon implies the same guarantee with epsilon 0).
    pub fn epsilon(self, alpha: f64, rdp: f64, delta: f64) -> f64 {
        let eps = match self {
            Conversion::Balle2020 => rdp + ((alpha - 1.0) / alpha).ln() - (delta.ln() + alpha.ln()) / (alpha - 1.0),
            Conversion::Classic => rdp - delta.ln() / (alpha - 1.0),
        };
        eps.max(0.0)
    }

    /// The name printed in reports.
    pub fn name(self) -> &'static str {
        match self {
            Conversion::Balle2020 => "balle2020",
            Conversion::Classic => "classic",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_batch_is_the_gaussian_rdp() {
        assert_eq!(subsampled_gaussian_rdp(1.0, 2.0, 3.0).unwrap(), 3.0 / 8.0);
    }

    #[test]
    fn integer_and_fractional_paths_agree_at_integer_orders() {
        // The fractional series is valid at every order; near an integer it must approach the
        // exact binomial sum.
        for &(q, z) in &[(0.01, 1.1), (0.1, 0.8), (0.5, 2.0)] {
            for alpha in [2.0, 5.0, 17.0] {
                let exact = subsampled_gaussian_rdp(q, z, alpha).unwrap();
                let near = log_a_fractional(q, z, alpha + 1e-9).unwrap() / (alpha - 1.0 + 1e-9);
                assert!((exact - near).abs() <= 1e-6 * exact, "q={q} z={z} a={alpha}: {exact} {near}");
            }
        }
    }

    #[test]
    fn rdp_grows_with_order_and_sample_rate() {
        let a = subsampled_gaussian_rdp(0.01, 1.0, 4.0).unwrap();
        let b = subsampled_gaussian_rdp(0.01, 1.0, 8.0).unwrap();
        let c = subsampled_gaussian_rdp(0.02, 1.0, 8.0).unwrap();
        assert!(a < b && b < c);
        // Order 2 has a closed form: A_2 = 1 + q^2 (exp(1/z^2) - 1).
        for &(q, z) in &[(1e-4, 4.0), (0.3, 0.7), (0.9, 1.5)] {
            let got = subsampled_gaussian_rdp(q, z, 2.0).unwrap();
            let want = (q * q * (1.0 / (z * z)).exp_m1()).ln_1p();
            assert!((got - want).abs() <= 1e-12 * want, "q={q} z={z}: {got} vs {want}");
        }
    }

    #[test]
    fn slowly_converging_orders_fall_back_to_the_integer_order_above() {
        // q = 1/2, a large noise multiplier and an order near 1: the fractional series cannot
        // converge in time (it fails without the fallback).
        let (q, z) = (0.5, 1e3);
        let fractional = subsampled_gaussian_rdp(q, z, 1.05).unwrap();
        assert_eq!(fractional, subsampled_gaussian_rdp(q, z, 2.0).unwrap());
        assert!(fractional > 0.0 && fractional < 1e-6);
    }

    #[test]
    fn rejects_order_one() {
        assert!(subsampled_gaussian_rdp(0.1, 1.0, 1.0).is_err());
    }

    #[test]
    fn grids() {
        let s = standard_orders();
        assert_eq!(s.len(), 99 + 52);
        assert_eq!(s[0], 1.1);
        assert_eq!(*s.last().unwrap(), 63.0);
        let e = extended_orders();
        assert!(e.windows(2).all(|w| w[0] < w[1]), "extended grid must be sorted");
    }
}
