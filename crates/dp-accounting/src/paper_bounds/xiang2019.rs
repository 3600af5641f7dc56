//! Xiang, Yang and Li (the optimized additive noise mechanism): the per-step budget of Eq. 12 and the per-step Gaussian condition
//! sum_i Delta_i^2 / sigma_i^2 <= tau, as printed and corrected (docs/MECHANISMS.md, "The
//! optimized additive noise mechanism").

use crate::error::{AccountingError, Result};
use crate::validate;

/// The per-iteration privacy parameters of Eq. 12.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerStepBudget {
    /// eps_t = eps / sqrt(16 q^2 k ln(e + eps/delta)).
    pub epsilon: f64,
    /// delta_t = delta / (2k).
    pub delta: f64,
}

/// Eq. 12: the budget each of `k` iterations at sampling rate `q` gets for an (epsilon, delta) run.
pub fn per_step_budget(epsilon: f64, delta: f64, q: f64, k: u64) -> Result<PerStepBudget> {
    let epsilon = validate::epsilon(epsilon)?;
    let delta = validate::delta(delta)?;
    let q = validate::sample_rate(q)?;
    let k = validate::steps(k)? as f64;
    let denom = (16.0 * q * q * k * (std::f64::consts::E + epsilon / delta).ln()).sqrt();
    Ok(PerStepBudget { epsilon: epsilon / denom, delta: delta / (2.0 * k) })
}

/// The paper's tau(eps, delta) = 2 eps + (2/lambda) ln delta for a positive integer lambda. It drops
/// the variance term of E[exp(lambda c)] and is not a sound condition.
pub fn tau_as_printed(step: PerStepBudget, lambda: u32) -> Result<f64> {
    if lambda == 0 {
        return Err(AccountingError::InvalidParameter {
            name: "lambda",
            value: "0".to_string(),
            requirement: "must be a positive integer",
        });
    }
    Ok(2.0 * step.epsilon + 2.0 / f64::from(lambda) * step.delta.ln())
}

/// The corrected condition: for c ~ N(S/2, S), E[exp(lambda c)] = exp(lambda (lambda + 1) S / 2), so
/// Markov gives S <= 2 (eps + ln(delta)/lambda) / (lambda + 1); maximised over lambda > 0 at
/// lambda* = (b + sqrt(b^2 + eps b)) / eps with b = ln(1/delta). Returns (tau, lambda*).
pub fn tau_corrected(step: PerStepBudget) -> Result<(f64, f64)> {
    let a = validate::epsilon(step.epsilon)?;
    let b = -validate::delta(step.delta)?.ln();
    let lambda = (b + (b * b + a * b).sqrt()) / a;
    Ok((2.0 * (a - b / lambda) / (lambda + 1.0), lambda))
}

/// The uniform noise multiplier sigma/alpha = 1/sqrt(tau) that meets a tau condition.
pub fn noise_multiplier_for_tau(tau: f64) -> Result<f64> {
    if tau.is_finite() && tau > 0.0 {
        Ok(1.0 / tau.sqrt())
    } else {
        Err(AccountingError::Unreachable(format!(
            "tau = {tau}: no noise level satisfies the per-step condition for this budget"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytic_gaussian::delta_for_epsilon;

    #[test]
    fn eq12_by_hand() {
        // eps = 1, delta = 1e-5, q = 0.01, k = 1000:
        // sqrt(16 * 1e-4 * 1000 * ln(e + 1e5)) = sqrt(1.6 * 11.512952...) = 4.29197...
        let b = per_step_budget(1.0, 1e-5, 0.01, 1000).unwrap();
        let want = 1.0 / (1.6f64 * (std::f64::consts::E + 1e5).ln()).sqrt();
        assert!((b.epsilon - want).abs() < 1e-15);
        assert!((b.epsilon - 0.232_993).abs() < 1e-5);
        assert_eq!(b.delta, 5e-9);
    }

    #[test]
    fn corrected_tau_is_sound_and_printed_tau_is_not() {
        let step = PerStepBudget { epsilon: 0.5, delta: 1e-6 };
        let (tau, lambda) = tau_corrected(step).unwrap();
        // lambda* is the maximiser: nearby lambdas give a smaller tau.
        let at = |l: f64| 2.0 * (step.epsilon + step.delta.ln() / l) / (l + 1.0);
        assert!(at(lambda) >= at(lambda * 1.01) && at(lambda) >= at(lambda * 0.99));
        assert!((at(lambda) - tau).abs() < 1e-15);
        // Sound: the exact Gaussian delta at this noise is within the per-step delta.
        let z = noise_multiplier_for_tau(tau).unwrap();
        assert!(delta_for_epsilon(z, step.epsilon) <= step.delta);
        // As printed, with lambda large the condition tends to S <= 2 eps: far too little noise.
        let printed = tau_as_printed(step, 1000).unwrap();
        let z_printed = noise_multiplier_for_tau(printed).unwrap();
        assert!(delta_for_epsilon(z_printed, step.epsilon) > 1000.0 * step.delta);
    }

    #[test]
    fn non_positive_tau_is_unreachable() {
        let step = PerStepBudget { epsilon: 0.01, delta: 1e-6 };
        let printed = tau_as_printed(step, 1).unwrap();
        assert!(printed < 0.0);
        assert!(noise_multiplier_for_tau(printed).is_err());
        assert!(tau_as_printed(step, 0).is_err());
    }
}
