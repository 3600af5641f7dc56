//! Special functions in log space: what the accountants need to stay accurate far into the tails.

use std::f64::consts::{LN_2, PI, SQRT_2};

/// ln(erfc(x)), accurate where erfc(x) underflows (x up to 1e150 and beyond).
pub fn log_erfc(x: f64) -> f64 {
    if x < 26.0 {
        libm::erfc(x).ln()
    } else {
        // Asymptotic series erfc(x) = exp(-x^2)/(x sqrt(pi)) * sum_k (-1)^k (2k-1)!! / (2x^2)^k;
        // at x >= 26 the terms fall below 1e-17 by k = 6.
        let inv = 1.0 / (2.0 * x * x);
        let mut term = 1.0;
        let mut sum = 1.0;
        for k in 1..8 {
            term *= -((2 * k - 1) as f64) * inv;
            sum += term;
        }
        -x * x - x.ln() - 0.5 * PI.ln() + sum.ln()
    }
}

/// ln(Phi(x)) for the standard normal CDF Phi, accurate in both tails.
pub fn log_ndtr(x: f64) -> f64 {
    if x > 0.0 { (-0.5 * libm::erfc(x / SQRT_2)).ln_1p() } else { log_erfc(-x / SQRT_2) - LN_2 }
}

/// The standard normal CDF Phi(x).
pub fn ndtr(x: f64) -> f64 {
    0.5 * libm::erfc(-x / SQRT_2)
}

/// ln(exp(a) + exp(b)) without overflow; -inf stands for zero.
pub fn log_add(a: f64, b: f64) -> f64 {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY { hi } else { hi + (lo - hi).exp().ln_1p() }
}

/// ln(exp(a) - exp(b)) for a >= b; -inf stands for zero. Returns NaN when b > a.
pub fn log_sub(a: f64, b: f64) -> f64 {
    if b > a {
        f64::NAN
    } else if b == f64::NEG_INFINITY {
        a
    } else if a == b {
        f64::NEG_INFINITY
    } else {
        a + (-(b - a).exp_m1()).ln()
    }
}

/// ln(1 - exp(-x)) for x > 0, the stable form of log(-expm1(-x)).
pub fn log1mexp(x: f64) -> f64 {
    if x < LN_2 { (-(-x).exp_m1()).ln() } else { (-(-x).exp()).ln_1p() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_erfc_is_continuous_at_the_switch() {
        let below = log_erfc(26.0 - 1e-9);
        let above = log_erfc(26.0);
        assert!((below - above).abs() < 1e-7 * above.abs(), "{below} vs {above}");
    }

    #[test]
    fn log_erfc_matches_reference_values() {
        // Values from mpmath (log(erfc(x)) at 50 digits).
        let cases = [
            (0.0, 0.0),
            (1.0, -1.849_605_509_933_248_2),
            (5.0, -27.200_889_545_537_434),
            (30.0, -903.974_117_110_643_9),
            (-3.0, 0.693_136_135_250_446_8),
        ];
        for (x, want) in cases {
            let got = log_erfc(x);
            let err = (got - want).abs() / want.abs().max(1.0);
            assert!(err < 1e-13, "log_erfc({x}) = {got}, want {want}");
        }
    }

    #[test]
    fn log_ndtr_tails() {
        assert!((log_ndtr(0.0) - 0.5f64.ln()).abs() < 1e-15);
        // Phi(-40) = 3.655893540915e-350 (mpmath): ln = -804.608442013754...
        assert!((log_ndtr(-40.0) + 804.608_442_013_754).abs() < 1e-9);
        // ln Phi(10) = -7.619853024160527e-24
        assert!((log_ndtr(10.0) + 7.619_853_024_160_527e-24).abs() < 1e-36);
    }

    #[test]
    fn log_add_sub_roundtrip() {
        let a = 3.0f64.ln();
        let b = 2.0f64.ln();
        assert!((log_add(a, b) - 5.0f64.ln()).abs() < 1e-15);
        assert!((log_sub(a, b) - 0.0).abs() < 1e-15);
        assert_eq!(log_sub(b, b), f64::NEG_INFINITY);
        assert!(log_sub(b, a).is_nan());
        assert!((log1mexp(1e-3) - (1.0 - (-1e-3f64).exp()).ln()).abs() < 1e-12);
    }
}
