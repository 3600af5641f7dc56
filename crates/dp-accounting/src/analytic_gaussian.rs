//! The analytic Gaussian mechanism (Balle & Wang 2018): exact (epsilon, delta) of one Gaussian
//! release, and of any full-batch (q = 1) run, which composes into a single Gaussian.

use crate::accountant::{Accountant, without_gaussian};
use crate::error::{AccountingError, Result};
use crate::event::DpEvent;
use crate::ledger::PrivacyLedger;
use crate::report::PrivacyReport;
use crate::special::log_ndtr;
use crate::validate;

/// delta(epsilon) of the Gaussian mechanism with noise multiplier z (sensitivity 1):
/// Phi(1/(2z) - eps z) - exp(eps) Phi(-1/(2z) - eps z), evaluated in log space (Theorem 8).
pub fn delta_for_epsilon(z: f64, epsilon: f64) -> f64 {
    let a = log_ndtr(0.5 / z - epsilon * z);
    let b = log_ndtr(-0.5 / z - epsilon * z);
    let ratio = epsilon + b - a;
    if ratio >= 0.0 { 0.0 } else { a.exp() * -ratio.exp_m1() }
}

/// Bisects a decreasing function `f` on [lo, hi] for f(x) = target, to 1e-14 relative.
fn bisect_decreasing(f: impl Fn(f64) -> f64, target: f64, mut lo: f64, mut hi: f64) -> f64 {
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if f(mid) > target {
            lo = mid
        } else {
            hi = mid
        }
        if hi - lo <= 1e-14 * hi {
            break;
        }
    }
    hi
}

/// The exact epsilon of one Gaussian release with noise multiplier `z` at `delta`.
pub fn epsilon_for_delta(z: f64, delta: f64) -> Result<f64> {
    let z = validate::noise_multiplier(z)?;
    let delta = validate::delta(delta)?;
    if delta_for_epsilon(z, 0.0) <= delta {
        return Ok(0.0);
    }
    let mut hi = 1.0;
    while delta_for_epsilon(z, hi) > delta {
        hi *= 2.0;
        if hi > 1e9 {
            return Err(AccountingError::Numerical(format!(
                "epsilon of the Gaussian mechanism with noise multiplier {z} exceeds 1e9"
            )));
        }
    }
    Ok(bisect_decreasing(|e| delta_for_epsilon(z, e), delta, 0.0, hi))
}

/// The smallest noise multiplier whose single Gaussian release is (epsilon, delta)-DP (Algorithm 1).
pub fn noise_for_epsilon(epsilon: f64, delta: f64) -> Result<f64> {
    let epsilon = validate::epsilon(epsilon)?;
    let delta = validate::delta(delta)?;
    let (mut lo, mut hi) = (1.0, 1.0);
    while delta_for_epsilon(lo, epsilon) <= delta {
        lo /= 2.0;
        if lo < 1e-12 {
            return Ok(lo);
        }
    }
    while delta_for_epsilon(hi, epsilon) > delta {
        hi *= 2.0;
    }
    // delta(eps; z) decreases in z.
    Ok(bisect_decreasing(|z| delta_for_epsilon(z, epsilon), delta, lo, hi))
}

/// Exact accountant for full-batch runs: T Gaussian steps with multipliers z_t compose into one
/// Gaussian with 1/z_eff^2 = sum_t 1/z_t^2. Refuses ledgers with subsampling.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnalyticGaussianAccountant;

impl Accountant for AnalyticGaussianAccountant {
    fn name(&self) -> &'static str {
        "analytic"
    }

    /// Unsampled Gaussian releases only (a Poisson rate of 1 is no sampling).
    fn supports(&self, event: &DpEvent) -> bool {
        event.parts().iter().all(|(_, part)| match part {
            DpEvent::Gaussian { .. } => true,
            DpEvent::PoissonSampled { sample_rate, of } => {
                *sample_rate == 1.0 && matches!(of.as_ref(), DpEvent::Gaussian { .. })
            }
            _ => false,
        })
    }

    fn epsilon(&self, ledger: &PrivacyLedger, delta: f64) -> Result<PrivacyReport> {
        let delta = validate::delta(delta)?;
        let groups = ledger.grouped()?;
        if let Some(e) = groups.iter().find(|e| e.sample_rate < 1.0) {
            return Err(AccountingError::InvalidParameter {
                name: "sample rate",
                value: e.sample_rate.to_string(),
                requirement: "the analytic Gaussian accountant needs full batches (q = 1); use rdp or prv",
            });
        }
        if groups.is_empty() || ledger.event().is_non_private() {
            return Ok(without_gaussian(self, ledger, delta));
        }
        let precision: f64 = groups.iter().map(|e| e.steps as f64 / (e.noise_multiplier * e.noise_multiplier)).sum();
        let z_eff = 1.0 / precision.sqrt();
        let guarantee = self.guarantee(&ledger.event());
        let mut report = PrivacyReport::new(epsilon_for_delta(z_eff, delta)?, delta, self.name(), guarantee);
        report.effective_noise_multiplier = Some(z_eff);
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_noise_and_epsilon() {
        for &(eps, delta) in &[(0.01, 1e-5), (1.0, 1e-5), (8.0, 1e-6), (100.0, 1e-5)] {
            let z = noise_for_epsilon(eps, delta).unwrap();
            let back = epsilon_for_delta(z, delta).unwrap();
            assert!((back - eps).abs() <= 1e-9 * eps.max(1.0), "eps={eps}: z={z} back={back}");
        }
    }

    #[test]
    fn classic_gaussian_bound_is_looser() {
        // Dwork-Roth: z = sqrt(2 ln(1.25/delta))/eps suffices for eps < 1; analytic needs less.
        let (eps, delta) = (0.5, 1e-5);
        let classic = (2.0 * (1.25f64 / delta).ln()).sqrt() / eps;
        let analytic = noise_for_epsilon(eps, delta).unwrap();
        assert!(analytic < classic);
        assert!(delta_for_epsilon(classic, eps) < delta);
    }

    #[test]
    fn refuses_subsampled_ledgers() {
        let l = PrivacyLedger::homogeneous(1.0, 0.5, 10).unwrap();
        assert!(AnalyticGaussianAccountant.epsilon(&l, 1e-5).is_err());
    }
}
