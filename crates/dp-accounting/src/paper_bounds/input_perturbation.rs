//! Kang et al., input perturbation: the variance of the Gaussian noise added once to
//! every training record, Theorem 1 (strongly convex loss) and Theorem 3 (Polyak-Lojasiewicz).

use crate::error::Result;
use crate::validate;

/// Which of the paper's two theorems applies to the loss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossCondition {
    /// Theorem 1: the loss is Delta-strongly convex (Delta given).
    StronglyConvex(f64),
    /// Theorem 3: the loss satisfies the Polyak-Lojasiewicz condition.
    PolyakLojasiewicz,
}

/// Inputs of Theorems 1 and 3.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InputNoiseInput {
    /// Target epsilon.
    pub epsilon: f64,
    /// Target delta.
    pub delta: f64,
    /// Gradient-descent rounds T.
    pub rounds: u64,
    /// Training set size n (at least 2).
    pub records: u64,
    /// Lipschitz constant G.
    pub lipschitz: f64,
    /// The unspecified constant c of the theorems (the engine's default is 1).
    pub c: f64,
    /// Strong convexity or PL.
    pub condition: LossCondition,
}

/// sigma of Eq. (9) / (12): sigma^2 = c G^2 T ln(1/delta) / (n (n-1) [sqrt(Delta)] eps^2).
pub fn input_noise_std(input: InputNoiseInput) -> Result<f64> {
    let eps = validate::epsilon(input.epsilon)?;
    let delta = validate::delta(input.delta)?;
    let t = validate::steps(input.rounds)? as f64;
    let n = validate::positive("number of records minus one", input.records.saturating_sub(1) as f64)? + 1.0;
    let g = validate::positive("Lipschitz constant", input.lipschitz)?;
    let c = validate::positive("constant c", input.c)?;
    let convexity = match input.condition {
        LossCondition::StronglyConvex(d) => validate::positive("strong convexity", d)?.sqrt(),
        LossCondition::PolyakLojasiewicz => 1.0,
    };
    let variance = c * g * g * t * (1.0 / delta).ln() / (n * (n - 1.0) * convexity * eps * eps);
    Ok(variance.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> InputNoiseInput {
        InputNoiseInput {
            epsilon: 0.5,
            delta: 1e-5,
            rounds: 100,
            records: 569,
            lipschitz: 1.0,
            c: 1.0,
            condition: LossCondition::PolyakLojasiewicz,
        }
    }

    #[test]
    fn by_hand() {
        // PL: sigma^2 = 100 ln(1e5) / (569 * 568 * 0.25) = 1151.29.../80798 = 0.0142490...
        let s = input_noise_std(base()).unwrap();
        assert!((s * s - 100.0 * 1e5f64.ln() / (569.0 * 568.0 * 0.25)).abs() < 1e-15);
        // Strongly convex with Delta = 0.04 divides the variance by sqrt(0.04) = 0.2.
        let sc = input_noise_std(InputNoiseInput { condition: LossCondition::StronglyConvex(0.04), ..base() }).unwrap();
        assert!((sc * sc - s * s / 0.2).abs() < 1e-14);
        // c scales the variance.
        let c4 = input_noise_std(InputNoiseInput { c: 4.0, ..base() }).unwrap();
        assert!((c4 - 2.0 * s).abs() < 1e-15);
    }

    #[test]
    fn rejects_single_record() {
        assert!(input_noise_std(InputNoiseInput { records: 1, ..base() }).is_err());
    }
}
