//! Kang et al.'s DBDP-ERM, Algorithm 1: every training row gets N(0, sigma^2 I) once, sigma from
//! Theorem 1 (c q G sqrt(T ln(1/delta)) / eps), then T steps of minibatch SGD on qn rows drawn
//! without replacement. The proof linearizes the loss in the noise: `paper-bound`.

use super::cost::Cost;
use super::{Outcome, Problem, paper_bound, perturb_rows};
use crate::error::Result;
use crate::linalg::{axpy, project_ball};
use crate::objective::regularized;
use crate::rng::NoiseRng;
use dp_accounting::paper_bounds::dbdp::theorem1_noise_std;

/// A run: T minibatches of qn rows.
pub fn cost(problem: &Problem) -> Cost {
    Cost::per_run(problem.settings.rounds as f64 * problem.settings.sample_rate)
}

/// Runs Algorithm 1 at `epsilon`.
pub fn run(problem: &Problem, epsilon: f64, rng: &mut NoiseRng) -> Result<Outcome> {
    let s = &problem.settings;
    let n = problem.train.len();
    let sigma = theorem1_noise_std(epsilon, s.delta, s.sample_rate, problem.constants.lipschitz, s.rounds, s.c)?;
    let private = perturb_rows(&problem.train, sigma, rng);
    let batch = ((s.sample_rate * n as f64).round() as usize).clamp(1, n);
    let rate = problem.learning_rate();
    let rows = problem.rows(&private);
    let mut theta = problem.model.init(rng);
    for _ in 0..s.rounds {
        let chosen = rng.sample_without_replacement(n, batch);
        let g = regularized(&theta, s.lambda, rows.gradient_sum(&theta, Some(&chosen), None), batch as f64);
        axpy(-rate, &g, &mut theta);
        project_ball(&mut theta, problem.constants.radius);
    }
    drop(rows);
    Ok(Outcome {
        theta,
        privacy: paper_bound("kang-dbdp-theorem1", epsilon, s.delta)?,
        noise_std: sigma,
        notes: vec![format!("sigma = {sigma:.4} per feature, added once to every row; minibatch {batch} of {n}")],
        private_data: Some(private),
    })
}
