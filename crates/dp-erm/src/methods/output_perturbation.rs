//! The certified output-perturbation baseline (Chaudhuri et al. 2011; Wu et al. 2017; Zhang et
//! al. 2017): T steps of projected gradient descent with step 1/L on the lambda-strongly convex F
//! from 0, then N(0, sigma^2 I) with sigma from the analytic Gaussian mechanism (Balle & Wang 2018)
//! at the L2 sensitivity of that output. Neighbouring data sets change one term of the mean
//! gradient by at most 2 G0 / n per step, and the step contracts by (1 - lambda / L), so the
//! outputs differ by at most (2 G0 / (n lambda)) (1 - (1 - lambda/L)^T).

use super::cost::Cost;
use super::{Outcome, Problem};
use crate::error::{ErmError, Result};
use crate::rng::NoiseRng;
use dp_accounting::analytic_gaussian::noise_for_epsilon;
use dp_accounting::{Accountant, AnalyticGaussianAccountant, DpEvent, PrivacyLedger};

/// Iterations of the solver whose output is perturbed (the bound holds for any T; the output is
/// within 1e-9 of the minimizer well before this on the unit-ball data).
pub const OUTPUT_ROUNDS: u64 = 5_000;

/// The L2 sensitivity of T steps of gradient descent with step 1/L on a lambda-strongly convex
/// objective whose per-example loss gradients are bounded by `gradient_bound`.
pub fn output_sensitivity(gradient_bound: f64, records: usize, lambda: f64, smoothness: f64, rounds: u64) -> f64 {
    let contraction = 1.0 - lambda / smoothness;
    2.0 * gradient_bound / (records as f64 * lambda) * (1.0 - contraction.powf(rounds as f64))
}

/// The experiment: one solution of its gradient descent, shared by every run; nothing where
/// the loss is not strongly convex (refused).
pub fn cost(problem: &Problem) -> Cost {
    let convex = problem.constants.smoothness.is_some() && problem.constants.strong_convexity.is_some();
    Cost { passes: 0.0, up_to: None, once: if convex { OUTPUT_ROUNDS as f64 } else { 0.0 } }
}

/// Runs output perturbation at `epsilon`.
pub fn run(problem: &Problem, epsilon: f64, rng: &mut NoiseRng) -> Result<Outcome> {
    let (Some(smoothness), Some(lambda)) = (problem.constants.smoothness, problem.constants.strong_convexity) else {
        return Err(ErmError::Refused {
            method: "output perturbation",
            reason: "its sensitivity bound needs a strongly convex loss; the MLP's is not convex".into(),
        });
    };
    let s = &problem.settings;
    let minimizer = problem.output_solution(smoothness)?;
    let sensitivity = output_sensitivity(
        problem.constants.loss_gradient_bound,
        problem.train.len(),
        lambda,
        smoothness,
        OUTPUT_ROUNDS,
    );
    let z = noise_for_epsilon(epsilon, s.delta)?;
    let sigma = z * sensitivity;
    let theta: Vec<f64> = minimizer.iter().zip(rng.gaussian(minimizer.len(), sigma)).map(|(t, b)| t + b).collect();
    let mut release = PrivacyLedger::new();
    release.record_event(DpEvent::Gaussian { noise_multiplier: z }, 1)?;
    let privacy = AnalyticGaussianAccountant.epsilon(&release, s.delta)?;
    Ok(Outcome {
        theta,
        privacy,
        noise_std: sigma,
        notes: vec![format!(
            "L2 sensitivity {sensitivity:.4e} after {OUTPUT_ROUNDS} gradient steps, noise multiplier {z:.4}"
        )],
        private_data: None,
    })
}
