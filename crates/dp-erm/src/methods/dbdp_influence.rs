//! Kang et al.'s DBDP-ERM, Algorithm 2 (performance-improving), exactly as written: start from the
//! non-private optimum theta~, compute H^{-1} there once, and for T = R * T_local single-example
//! SGD steps estimate each drawn example's contribution c_t = (1/n) H^{-1} grad l(z_t, theta_r^(g))
//! (Eq. 14); when ||(c_t + theta_r^(g)) / theta_r^(g)||_2 (element-wise division) lies in
//! [e^-eps, e^eps] the step uses z_t as is (line 10), otherwise z_t + b_t with
//! b_t ~ N(0, sigma_t^2 I), sigma_t from Theorem 2 with w_t = ||d/dx grad_theta l(z_t, theta_t^(l))||.
//! Skipping noise by an influence test is not a privacy argument, theta~ is released unperturbed
//! into the starting point, and Theorem 2 linearizes: `paper-bound`.

use super::cost::Cost;
use super::{Outcome, Problem, paper_bound};
use crate::error::{ErmError, Result};
use crate::inverse_hessian::{CG_ITERATIONS, DENSE_LIMIT, InverseHessian};
use crate::linalg::{axpy, norm, project_ball};
use crate::objective::Objective;
use crate::rng::NoiseRng;
use dp_accounting::paper_bounds::dbdp::{Theorem2Input, theorem2_noise_std};

/// c_t = -(1/n) (-H^{-1} g) for the gradient `g` of one example's loss.
pub fn influence(inverse: &InverseHessian, objective: &Objective<'_>, gradient: &[f64]) -> Result<Vec<f64>> {
    let n = objective.data.len() as f64;
    Ok(inverse.solve(objective, gradient)?.into_iter().map(|v| v / n).collect())
}

/// ||(c + theta) / theta||_2 with element-wise division (line 9); infinite where theta has a zero.
pub fn contribution_ratio(contribution: &[f64], theta: &[f64]) -> f64 {
    norm(&contribution.iter().zip(theta).map(|(c, t)| (c + t) / t).collect::<Vec<_>>())
}

/// A run: T single-example steps, each with an influence H^{-1} g. A model of at most
/// [`DENSE_LIMIT`] parameters factors its Hessian once (about p passes to build it); a larger one
/// (a softmax over many classes) solves each by conjugate gradient, up to
/// [`CG_ITERATIONS`] Hessian products (two passes each) per step.
pub fn cost(problem: &Problem) -> Cost {
    let p = problem.model.dim() as f64;
    let steps = problem.settings.rounds.div_ceil(problem.settings.t_local) as f64 * problem.settings.t_local as f64;
    let n = problem.train.len().max(1) as f64;
    if problem.model.dim() <= DENSE_LIMIT {
        Cost { passes: steps / n, up_to: None, once: p }
    } else {
        Cost {
            passes: steps * 2.0 * (p.sqrt()).min(CG_ITERATIONS as f64),
            up_to: Some(steps * 2.0 * CG_ITERATIONS as f64),
            once: 0.0,
        }
    }
}

/// Runs Algorithm 2 at `epsilon`.
pub fn run(problem: &Problem, epsilon: f64, rng: &mut NoiseRng) -> Result<Outcome> {
    let s = &problem.settings;
    let n = problem.train.len();
    let rounds = s.rounds.div_ceil(s.t_local);
    let total = rounds * s.t_local;
    let theorem = |w: f64| {
        theorem2_noise_std(Theorem2Input {
            epsilon,
            delta: s.delta,
            lipschitz: problem.constants.lipschitz,
            iterations: total,
            records: n as u64,
            influence_norm: w,
            c: s.c,
            c1: s.c1,
        })
    };
    theorem(1.0)?; // Theorem 2's range of epsilon does not depend on w_t: refuse before any work.
    let objective = problem.objective();
    let inverse = problem.inverse_hessian()?;
    let rate = problem.learning_rate();
    let (lower, upper) = ((-epsilon).exp(), epsilon.exp());
    let mut global = problem.optimum.clone();
    let mut private = problem.train.clone();
    let (mut noised, mut largest_sigma) = (0u64, 0.0f64);
    for _ in 0..rounds {
        let mut local = global.clone();
        for _ in 0..s.t_local {
            let i = rng.index(n);
            let (x, y) = (problem.train.row(i), problem.train.labels[i]);
            let c = influence(inverse, &objective, &objective.example_gradient(&global, x, y))?;
            let ratio = contribution_ratio(&c, &global);
            let step = if (lower..=upper).contains(&ratio) {
                objective.example_gradient(&local, x, y)
            } else {
                let w = problem.model.mixed_norm(&local, x, y);
                if !(w > 0.0 && w.is_finite()) {
                    return Err(ErmError::Refused {
                        method: "dbdp-if",
                        reason: format!(
                            "w_t = ||d/dx grad l|| = {w} for a drawn example (its loss is saturated at this theta), so \
                             Theorem 2's sigma_t is infinite"
                        ),
                    });
                }
                let sigma = theorem(w)?;
                largest_sigma = largest_sigma.max(sigma);
                noised += 1;
                let perturbed: Vec<f64> = x.iter().zip(rng.gaussian(x.len(), sigma)).map(|(a, b)| a + b).collect();
                let dim = private.dim;
                private.features[i * dim..(i + 1) * dim].copy_from_slice(&perturbed);
                objective.example_gradient(&local, &perturbed, y)
            };
            axpy(-rate, &step, &mut local);
            project_ball(&mut local, problem.constants.radius);
        }
        global = local;
    }
    Ok(Outcome {
        theta: global,
        privacy: paper_bound("kang-dbdp-theorem2", epsilon, s.delta)?,
        noise_std: largest_sigma,
        notes: vec![
            format!(
                "{noised} of {total} steps noised (line 12), the others used the raw example (line 10); largest sigma_t {largest_sigma:.4e}"
            ),
            "starts from the non-private optimum theta~, which no noise covers".into(),
        ],
        private_data: Some(private),
    })
}
