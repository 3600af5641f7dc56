//! The certified objective-perturbation baseline of Kifer, Smith and Thakurta (COLT 2012), the
//! Gaussian (epsilon, delta) version: minimize sum_i l_i(theta) + (n lambda / 2) ||theta||^2 +
//! (Delta / 2) ||theta||^2 + b.theta with Delta = 2 beta / eps and
//! b ~ N(0, zeta^2 (8 ln(2/delta) + 4 eps) / eps^2 I), where zeta bounds ||grad l|| and beta the
//! eigenvalues of its Hessian, which must have rank at most one (a binary GLM). The theorem is for
//! the exact minimizer; the solver stops at a gradient-mapping norm of 1e-10.

use super::cost::Cost;
use super::{Outcome, Problem};
use crate::error::{ErmError, Result};
use crate::model::Curvature;
use crate::rng::NoiseRng;
use crate::solver::Minimizer;
use dp_accounting::{BasicComposition, DpEvent};

/// The solver's iteration cap.
const OBJECTIVE_ITERATIONS: usize = 200_000;

/// The noise and extra regularization of the theorem.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObjectiveNoise {
    /// Delta = 2 beta / eps, added to the sum-form objective.
    pub regularization: f64,
    /// The standard deviation sqrt(zeta^2 (8 ln(2/delta) + 4 eps) / eps^2) of each coordinate of b.
    pub sigma: f64,
}

impl ObjectiveNoise {
    /// Theorem values for gradient bound `zeta`, Hessian bound `beta`, at (`epsilon`, `delta`).
    pub fn new(zeta: f64, beta: f64, epsilon: f64, delta: f64) -> Self {
        Self {
            regularization: 2.0 * beta / epsilon,
            sigma: (zeta * zeta * (8.0 * (2.0 / delta).ln() + 4.0 * epsilon)).sqrt() / epsilon,
        }
    }
}

/// A run: a minimization that starts from the optimum, taken as 100 passes (a rough expectation,
/// not measured per problem) and at most the solver's iteration cap; nothing where the theorem
/// refuses the model (not a binary GLM).
pub fn cost(problem: &Problem) -> Cost {
    match problem.model.curvature() {
        Curvature::Convex { rank_one: true, .. } => {
            Cost { passes: 100.0, up_to: Some(OBJECTIVE_ITERATIONS as f64), once: 0.0 }
        }
        _ => Cost::per_run(0.0),
    }
}

/// Runs objective perturbation at `epsilon`.
pub fn run(problem: &Problem, epsilon: f64, rng: &mut NoiseRng) -> Result<Outcome> {
    let beta = match problem.model.curvature() {
        Curvature::Convex { smoothness, rank_one: true } => smoothness,
        Curvature::Convex { .. } => {
            return Err(ErmError::Refused {
                method: "objective perturbation",
                reason: "Kifer et al.'s theorem needs per-example Hessians of rank one (a binary GLM); softmax \
                         regression's have rank K-1"
                    .into(),
            });
        }
        Curvature::NonConvex => {
            return Err(ErmError::Refused {
                method: "objective perturbation",
                reason: "the theorem needs a convex loss; the MLP's is not convex".into(),
            });
        }
    };
    let s = &problem.settings;
    let n = problem.train.len() as f64;
    let noise = ObjectiveNoise::new(problem.constants.loss_gradient_bound, beta, epsilon, s.delta);
    let b = rng.gaussian(problem.model.dim(), noise.sigma);
    // Mean form: F(theta) + (Delta / (2n)) ||theta||^2 + b.theta / n.
    let extra = noise.regularization / n;
    let objective = problem.objective();
    let f = |t: &[f64]| {
        let mut g = objective.gradient(t);
        g.iter_mut().zip(t).zip(&b).for_each(|((gi, ti), bi)| *gi += extra * ti + bi / n);
        let value = objective.value(t) + 0.5 * extra * crate::linalg::dot(t, t) + crate::linalg::dot(&b, t) / n;
        (value, g)
    };
    let (l, mu) = (problem.constants.smoothness.unwrap_or(1.0) + extra, s.lambda + extra);
    let minimizer =
        Minimizer { constants: Some((l, mu)), radius: None, tolerance: 1e-10, max_iterations: OBJECTIVE_ITERATIONS };
    let theta = minimizer.minimize(f, problem.optimum.clone())?;
    Ok(Outcome {
        theta,
        privacy: BasicComposition::of(
            DpEvent::Proven { theorem: "kifer2012".into(), epsilon, delta: s.delta },
            s.delta,
        )?,
        noise_std: noise.sigma,
        notes: vec![format!(
            "b ~ N(0, {:.4}^2 I), extra regularization Delta = {:.4} (sum form); exact minimizer assumed (solved to 1e-10)",
            noise.sigma, noise.regularization
        )],
        private_data: None,
    })
}
