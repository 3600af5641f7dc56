//! A hyper-parameter search as one private release (Papernot & Steinke, ICLR 2022, "Hyperparameter
//! Tuning with Renyi Differential Privacy"): a random number K of candidates, each a DP training
//! with its own hyper-parameters, of which only the best is released. K is drawn from a truncated
//! negative binomial distribution (their Theorem 2; shape 0 is the logarithmic distribution, 1
//! the geometric) or a Poisson distribution (their Theorem 6); the RDP of the whole follows from
//! the RDP curve of one candidate, computed as Google's dp_accounting computes it
//! (`rdp_privacy_accountant._compute_rdp_repeat_and_select`), against whose values it is tested.

use crate::error::{AccountingError, Result};
use libm::lgamma as ln_gamma;
use serde::{Deserialize, Serialize};

/// The largest mean number of candidates accepted: far beyond any search, and small enough that
/// ln(mean) and mean * delta stay exact.
pub const MAX_MEAN: f64 = 1e6;

/// How the number of candidates K is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "distribution", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Repetitions {
    /// Truncated negative binomial of shape eta >= 0 (0: logarithmic, 1: geometric) with the
    /// given mean; K >= 1.
    TruncatedNegativeBinomial {
        /// The shape eta.
        shape: f64,
        /// The mean of K (>= 1).
        mean: f64,
    },
    /// Poisson with the given mean; K = 0 releases nothing.
    Poisson {
        /// The mean of K (>= 1, as dp_accounting requires).
        mean: f64,
    },
}

impl Repetitions {
    /// Refuses a shape or mean the theorems do not cover, or an absurd one.
    pub fn validate(self) -> Result<Self> {
        let invalid = |name, value: f64, requirement| AccountingError::InvalidParameter {
            name,
            value: value.to_string(),
            requirement,
        };
        let mean = match self {
            Repetitions::TruncatedNegativeBinomial { shape, mean } => {
                if !(shape.is_finite() && shape >= 0.0) {
                    return Err(invalid("candidates' shape", shape, "must be a finite number >= 0"));
                }
                mean
            }
            Repetitions::Poisson { mean } => mean,
        };
        if !(mean.is_finite() && (1.0..=MAX_MEAN).contains(&mean)) {
            return Err(invalid("mean number of candidates", mean, "must be between 1 and 1e6"));
        }
        Ok(self)
    }

    /// The probability that K = `k` (Papernot & Steinke, Definition 1; for Poisson,
    /// e^-mu mu^k / k!).
    pub fn probability(self, k: u64) -> f64 {
        self.probability_at(k, self.halting())
    }

    /// P[K = 0], P[K = 1], ..., for drawing K by inverting its distribution function (the
    /// truncated negative binomial's halting probability found once).
    pub fn probabilities(self) -> impl Iterator<Item = f64> {
        let gamma = self.halting();
        (0u64..).map(move |k| self.probability_at(k, gamma))
    }

    /// The truncated negative binomial's halting probability gamma (unused for Poisson).
    fn halting(self) -> f64 {
        match self {
            Repetitions::TruncatedNegativeBinomial { shape, mean } => tnb_gamma(shape, mean),
            Repetitions::Poisson { .. } => 1.0,
        }
    }

    /// P[K = k] at halting probability `gamma`.
    fn probability_at(self, k: u64, gamma: f64) -> f64 {
        let k = k as f64;
        let ln_p = match self {
            Repetitions::Poisson { mean } => -mean + k * mean.ln() - ln_gamma(k + 1.0),
            Repetitions::TruncatedNegativeBinomial { .. } if k < 1.0 => return 0.0,
            // Mean 1: always exactly one candidate (the formulas divide 0 by 0 there).
            Repetitions::TruncatedNegativeBinomial { .. } if gamma >= 1.0 => return f64::from(u8::from(k == 1.0)),
            Repetitions::TruncatedNegativeBinomial { shape, .. } => {
                let tail = k * (-gamma).ln_1p();
                if shape == 0.0 {
                    // (1 - gamma)^k / (k ln(1 / gamma)).
                    tail - k.ln() - (-gamma.ln()).ln()
                } else {
                    // C(k + eta - 1, k) gamma^eta (1 - gamma)^k / (1 - gamma^eta).
                    ln_gamma(k + shape) - ln_gamma(k + 1.0) - ln_gamma(shape) + shape * gamma.ln() + tail
                        - (-(shape * gamma.ln()).exp_m1()).ln()
                }
            }
        };
        ln_p.exp()
    }

    /// The mean number of candidates.
    pub fn mean(self) -> f64 {
        match self {
            Repetitions::TruncatedNegativeBinomial { mean, .. } | Repetitions::Poisson { mean } => mean,
        }
    }
}

/// The RDP at `orders` of the search whose one candidate has RDP `rdp` at those orders (orders
/// at or below 1 get infinity: the theorems need lambda > 1).
pub fn repeated_rdp(orders: &[f64], rdp: &[f64], repetitions: Repetitions) -> Result<Vec<f64>> {
    if orders.len() != rdp.len() {
        return Err(AccountingError::Numerical(format!("{} orders for {} RDP values", orders.len(), rdp.len())));
    }
    let repetitions = repetitions.validate()?;
    let log_mean = repetitions.mean().ln();
    match repetitions {
        Repetitions::Poisson { mean } => Ok(orders
            .iter()
            .zip(rdp)
            .map(|(&a, &r)| {
                if a <= 1.0 {
                    return f64::INFINITY;
                }
                let delta_hat = rdp_delta(orders, rdp, (1.0 / (a - 1.0)).ln_1p());
                r + mean * delta_hat + log_mean / (a - 1.0)
            })
            .collect()),
        Repetitions::TruncatedNegativeBinomial { shape, mean } => {
            let log_gamma = tnb_gamma(shape, mean).ln();
            let c = (1.0 + shape)
                * orders
                    .iter()
                    .zip(rdp)
                    .map(|(&a, &r)| (1.0 - 1.0 / a) * r - log_gamma / a)
                    .fold(f64::INFINITY, f64::min);
            let direct: Vec<f64> = orders
                .iter()
                .zip(rdp)
                .map(|(&a, &r)| if a > 1.0 { r + log_mean / (a - 1.0) + c } else { f64::INFINITY })
                .collect();
            // RDP does not decrease with the order: a higher order's bound holds at a lower one.
            Ok(orders
                .iter()
                .map(|&a| {
                    orders.iter().zip(&direct).filter(|(b, _)| a <= **b).map(|(_, &v)| v).fold(f64::INFINITY, f64::min)
                })
                .collect())
        }
    }
}

/// The smallest delta at which the RDP curve (`orders`, `rdp`) gives `epsilon` (Canonne, Kamath
/// and Steinke 2020, Proposition 12, with the bound through the KL divergence at small RDP).
pub fn rdp_delta(orders: &[f64], rdp: &[f64], epsilon: f64) -> f64 {
    let log_delta = orders
        .iter()
        .zip(rdp)
        .map(|(&a, &r)| {
            let kl = if r <= 0.0 { f64::NEG_INFINITY } else { 0.5 * (-(-r).exp()).ln_1p() };
            if a > 1.01 { kl.min((a - 1.0) * (r - epsilon + (-1.0 / a).ln_1p()) - a.ln()) } else { kl }
        })
        .fold(f64::INFINITY, f64::min);
    log_delta.exp().min(1.0)
}

/// The mean of the truncated negative binomial distribution of halting probability `gamma` in
/// (0, 1] and shape `shape` (Papernot & Steinke, Definition 1).
fn tnb_mean(gamma: f64, shape: f64) -> f64 {
    if shape == 1.0 {
        1.0 / gamma
    } else if shape == 0.0 {
        1.0 / (gamma * log_x_over_x_minus_1(gamma))
    } else {
        1.0 / (gamma * expm1_over_x(shape * gamma.ln()) * log_x_over_x_minus_1(gamma))
    }
}

/// The halting probability gamma of the truncated negative binomial of `shape` with `mean`, by
/// bisection to a relative 1e-9, the lower end kept (a smaller gamma is the conservative one).
fn tnb_gamma(shape: f64, mean: f64) -> f64 {
    if shape == 1.0 {
        return 1.0 / mean;
    }
    let (mut low, mut high) = (0.0f64, (2.0 * (shape + 1.0) / mean).min(1.0));
    while high > low * (1.0 + 1e-9) {
        let mid = (low + high) / 2.0;
        if tnb_mean(mid, shape) < mean {
            high = mid;
        } else {
            low = mid;
        }
    }
    low
}

/// (e^x - 1) / x, by its series near 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 0.1 {
        return x.exp_m1() / x;
    }
    let (mut sum, mut term) = (0.0, 1.0);
    for k in 1..100 {
        term /= f64::from(k);
        sum += term;
        term *= x;
    }
    sum
}

/// ln(x) / (x - 1), by its series near 1.
fn log_x_over_x_minus_1(x: f64) -> f64 {
    if !(0.9..=1.1).contains(&x) {
        return x.ln() / (x - 1.0);
    }
    let y = 1.0 - x;
    (1..100).map(|k| y.powi(k - 1) / f64::from(k)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_distributions_mean_is_the_one_asked_for() {
        for shape in [0.0, 0.5, 1.0, 2.0, 7.0] {
            for mean in [1.0, 1.5, 3.0, 10.0, 1000.0] {
                let got = tnb_mean(tnb_gamma(shape, mean), shape);
                assert!((got - mean).abs() <= 1e-6 * mean, "shape {shape} mean {mean}: {got}");
            }
        }
    }

    #[test]
    fn the_probabilities_sum_to_one_with_the_mean_asked_for() {
        let cases = [0.0, 0.5, 1.0, 2.0].map(|shape| Repetitions::TruncatedNegativeBinomial { shape, mean: 4.0 });
        for r in cases.into_iter().chain([Repetitions::Poisson { mean: 4.0 }]) {
            let p: Vec<f64> = (0..2000).map(|k| r.probability(k)).collect();
            let total: f64 = p.iter().sum();
            let mean: f64 = p.iter().enumerate().map(|(k, p)| k as f64 * p).sum();
            assert!((total - 1.0).abs() < 1e-9 && (mean - 4.0).abs() < 1e-6, "{r:?}: {total} {mean}");
        }
        for shape in [0.0, 1.0, 3.0] {
            let once = Repetitions::TruncatedNegativeBinomial { shape, mean: 1.0 };
            assert!((once.probability(1) - 1.0).abs() < 1e-6 && once.probability(2) < 1e-6, "shape {shape}, mean 1");
        }
        let geometric = Repetitions::TruncatedNegativeBinomial { shape: 1.0, mean: 4.0 };
        assert!((geometric.probability(1) - 0.25).abs() < 1e-12 && (geometric.probability(2) - 0.1875).abs() < 1e-12);
    }

    /// Papernot & Steinke's pure-DP corollary of Theorem 2: candidates that are eps-DP (RDP eps
    /// at every order) make a truncated negative binomial search of shape eta (2 + eta) eps-DP,
    /// the limit of the bound at large orders: 2 eps for the logarithmic distribution, 3 eps for
    /// the geometric (Liu & Talwar 2019's figure, which the paper recovers). With eps small beside
    /// log(1/gamma) the minimum over the second order is at the largest one, so the limit is met.
    #[test]
    fn pure_dp_candidates_give_the_papers_two_plus_eta_epsilon() {
        let orders: Vec<f64> = (0..=90).map(|i| 1.5 * 10f64.powf(f64::from(i) / 10.0)).collect();
        for (shape, eps) in [(0.0, 0.1), (0.5, 0.05), (1.0, 0.1), (2.0, 0.02)] {
            let search = Repetitions::TruncatedNegativeBinomial { shape, mean: 10.0 };
            let rdp = repeated_rdp(&orders, &vec![eps; orders.len()], search).unwrap();
            let at_infinity = (2.0 + shape) * eps;
            let top = rdp[orders.len() - 1];
            assert!((top - at_infinity).abs() < 1e-6 * at_infinity, "eta {shape}: {top} vs {at_infinity}");
            assert!(rdp.windows(2).all(|w| w[0] <= w[1] + 1e-15), "the bound does not decrease with the order");
        }
    }

    #[test]
    fn absurd_searches_are_refused() {
        let tnb = |shape, mean| Repetitions::TruncatedNegativeBinomial { shape, mean }.validate();
        assert!(tnb(-0.5, 3.0).is_err() && tnb(f64::NAN, 3.0).is_err() && tnb(1.0, 0.5).is_err());
        assert!(tnb(1.0, 1e7).is_err() && Repetitions::Poisson { mean: f64::INFINITY }.validate().is_err());
        assert!(repeated_rdp(&[2.0], &[0.1, 0.2], Repetitions::Poisson { mean: 2.0 }).is_err());
    }
}
