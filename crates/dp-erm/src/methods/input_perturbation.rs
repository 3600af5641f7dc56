//! Kang et al.'s input perturbation, Algorithm 1: every training row gets N(0, sigma^2 I) once, with
//! sigma from Theorem 1 (strongly convex: logistic and softmax regression) or Theorem 3 (the PL
//! condition, which the paper assumes for the MLP), then T rounds of full-batch gradient descent
//! on the perturbed rows. The privacy argument treats a loss gap as a constant: `paper-bound`.

use super::cost::Cost;
use super::{Outcome, Problem, paper_bound, perturb_rows};
use crate::error::Result;
use crate::objective::regularized;
use crate::rng::NoiseRng;
use crate::solver::gradient_descent;
use dp_accounting::paper_bounds::input_perturbation::{InputNoiseInput, LossCondition, input_noise_std};

/// A run: T passes of full-batch gradient descent.
pub fn cost(problem: &Problem) -> Cost {
    Cost::per_run(problem.settings.rounds as f64)
}

/// Runs Algorithm 1 at `epsilon`.
pub fn run(problem: &Problem, epsilon: f64, rng: &mut NoiseRng) -> Result<Outcome> {
    let s = &problem.settings;
    let (condition, accountant) = match problem.constants.strong_convexity {
        Some(delta) => (LossCondition::StronglyConvex(delta), "kang-input-theorem1"),
        None => (LossCondition::PolyakLojasiewicz, "kang-input-theorem3"),
    };
    let sigma = input_noise_std(InputNoiseInput {
        epsilon,
        delta: s.delta,
        rounds: s.rounds,
        records: problem.train.len() as u64,
        lipschitz: problem.constants.lipschitz,
        c: s.c,
        condition,
    })?;
    let private = perturb_rows(&problem.train, sigma, rng);
    let rows = problem.rows(&private);
    let theta = gradient_descent(
        |t| regularized(t, s.lambda, rows.gradient_sum(t, None, None), private.len() as f64),
        problem.model.init(rng),
        problem.learning_rate(),
        s.rounds,
        Some(problem.constants.radius),
    )?;
    drop(rows);
    let mut notes = vec![format!("sigma = {sigma:.4} per feature, added once to every training row")];
    if condition == LossCondition::PolyakLojasiewicz {
        notes.push("Theorem 3 assumes the PL condition, which is not verified for the MLP".into());
    }
    Ok(Outcome {
        theta,
        privacy: paper_bound(accountant, epsilon, s.delta)?,
        noise_std: sigma,
        notes,
        private_data: Some(private),
    })
}
