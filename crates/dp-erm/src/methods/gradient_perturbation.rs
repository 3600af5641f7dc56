//! The certified gradient-perturbation baseline: DP-SGD with Poisson sampling at rate q, every
//! per-example loss gradient clipped to C (the regularizer's gradient is data-independent and
//! added after the noise), N(0, z^2 C^2 I) per step, z calibrated by the RDP accountant.

use super::{Outcome, Problem};
use crate::error::Result;
use crate::linalg::{axpy, norm, project_ball};
use crate::model::Curvature;
use crate::rng::NoiseRng;
use dp_accounting::{RdpAccountant, calibrate_noise_multiplier};

/// Runs DP-SGD at `epsilon`.
pub fn run(problem: &Problem, epsilon: f64, rng: &mut NoiseRng) -> Result<Outcome> {
    let s = &problem.settings;
    let n = problem.train.len();
    let clip = s.clip_norm.unwrap_or(match problem.model.curvature() {
        Curvature::Convex { .. } => problem.constants.loss_gradient_bound,
        Curvature::NonConvex => 1.0,
    });
    let calibration = calibrate_noise_multiplier(&RdpAccountant::default(), epsilon, s.delta, s.sample_rate, s.rounds)?;
    let z = calibration.noise_multiplier;
    let rate = problem.learning_rate();
    let expected = s.sample_rate * n as f64;
    let p = problem.model.dim();
    let mut theta = problem.model.init(rng);
    for _ in 0..s.rounds {
        let mut sum = rng.gaussian(p, z * clip);
        for i in 0..n {
            if !rng.bernoulli(s.sample_rate) {
                continue;
            }
            let mut g = vec![0.0; p];
            problem.model.add_gradient(&theta, problem.train.row(i), problem.train.labels[i], 1.0, &mut g);
            let scale = (clip / norm(&g)).min(1.0);
            axpy(scale, &g, &mut sum);
        }
        let mut step: Vec<f64> = theta.iter().map(|t| s.lambda * t).collect();
        axpy(1.0 / expected, &sum, &mut step);
        axpy(-rate, &step, &mut theta);
        project_ball(&mut theta, problem.constants.radius);
    }
    Ok(Outcome {
        theta,
        privacy: calibration.report,
        noise_std: z * clip,
        notes: vec![format!(
            "noise multiplier {z:.4}, clip norm {clip:.4}, Poisson rate {}, {} steps",
            s.sample_rate, s.rounds
        )],
        private_data: None,
    })
}
