//! Kang et al., DBDP-ERM: the data-perturbation noise of Theorem 1 (Algorithm 1) and the
//! per-example noise of Theorem 2 (Algorithm 2, influence functions).

use crate::error::{AccountingError, Result};
use crate::validate;

/// Theorem 1, Eq. (10): sigma >= c q G sqrt(T ln(1/delta)) / eps.
pub fn theorem1_noise_std(epsilon: f64, delta: f64, q: f64, lipschitz: f64, iterations: u64, c: f64) -> Result<f64> {
    let eps = validate::epsilon(epsilon)?;
    let delta = validate::delta(delta)?;
    let q = validate::sample_rate(q)?;
    let g = validate::positive("Lipschitz constant", lipschitz)?;
    let t = validate::steps(iterations)? as f64;
    let c = validate::positive("constant c", c)?;
    Ok(c * q * g * (t * (1.0 / delta).ln()).sqrt() / eps)
}

/// Inputs of Theorem 2.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Theorem2Input {
    /// Target epsilon; the theorem requires 0 < eps < c1 T / n^2.
    pub epsilon: f64,
    /// Target delta.
    pub delta: f64,
    /// Lipschitz constant G.
    pub lipschitz: f64,
    /// T = R * T_local.
    pub iterations: u64,
    /// Training set size n.
    pub records: u64,
    /// w_t = ||d/dx grad_theta loss(z_t, theta_t)||_2 for the example being perturbed.
    pub influence_norm: f64,
    /// The unspecified constant c of Eq. (15).
    pub c: f64,
    /// The unspecified constant c1 of the theorem's range for epsilon.
    pub c1: f64,
}

/// Theorem 2, Eq. (15): sigma_t >= c G sqrt(T ln(1/delta)) / sqrt(w_t n eps). Refuses epsilons
/// outside the theorem's stated range 0 < eps < c1 T / n^2.
pub fn theorem2_noise_std(input: Theorem2Input) -> Result<f64> {
    let eps = validate::epsilon(input.epsilon)?;
    let delta = validate::delta(input.delta)?;
    let g = validate::positive("Lipschitz constant", input.lipschitz)?;
    let t = validate::steps(input.iterations)? as f64;
    let n = validate::positive("number of records", input.records as f64)?;
    let w = validate::positive("influence norm w_t", input.influence_norm)?;
    let c = validate::positive("constant c", input.c)?;
    let c1 = validate::positive("constant c1", input.c1)?;
    let limit = c1 * t / (n * n);
    if eps >= limit {
        return Err(AccountingError::InvalidParameter {
            name: "epsilon",
            value: eps.to_string(),
            requirement: "Theorem 2 of DBDP-ERM only covers 0 < eps < c1 T / n^2; raise T or c1",
        });
    }
    Ok(c * g * (t * (1.0 / delta).ln()).sqrt() / (w * n * eps).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn theorem1_by_hand() {
        // c=1, q=0.01, G=1, T=1000, delta=1e-5, eps=1: 0.01 * sqrt(1000 * 11.5129...) = 1.0729830...
        let s = theorem1_noise_std(1.0, 1e-5, 0.01, 1.0, 1000, 1.0).unwrap();
        assert!((s - 0.01 * (1000.0 * 1e5f64.ln()).sqrt()).abs() < 1e-15);
        assert!((s - 1.072_983_013).abs() < 1e-9);
    }

    #[test]
    fn theorem2_by_hand_and_range() {
        let input = Theorem2Input {
            epsilon: 0.1,
            delta: 1e-5,
            lipschitz: 1.0,
            iterations: 1_000_000,
            records: 100,
            influence_norm: 2.0,
            c: 1.0,
            c1: 1.0,
        };
        // limit = 1e6 / 1e4 = 100 > 0.1; sigma = sqrt(1e6 * 11.5129) / sqrt(2 * 100 * 0.1)
        let s = theorem2_noise_std(input).unwrap();
        assert!((s - (1e6 * 1e5f64.ln()).sqrt() / 20f64.sqrt()).abs() < 1e-9);
        let out_of_range = Theorem2Input { iterations: 10, ..input };
        assert!(theorem2_noise_std(out_of_range).is_err());
    }
}
