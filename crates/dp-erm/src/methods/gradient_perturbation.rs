//! The certified gradient-perturbation baseline: DP-SGD with Poisson sampling at rate q, every
//! per-example loss gradient clipped to C (the regularizer's gradient is data-independent and
//! added after the noise), N(0, z^2 C^2 I) per step, z calibrated by the RDP accountant. An
//! auditor may add white-box gradient canaries (Steinke, Nasr and Jagielski 2023, Section 7).

use super::{Outcome, Problem};
use crate::error::Result;
use crate::linalg::{axpy, project_ball};
use crate::model::Curvature;
use crate::objective::regularized;
use crate::rng::NoiseRng;
use dp_accounting::{Guarantee, PrivacyReport, RdpAccountant, calibrate_noise_multiplier};

/// White-box gradient canaries: canary i is a record whose clipped gradient is C e_i on an extra
/// coordinate of its own (a Dirac canary), Poisson-sampled like every record when included; the
/// released noisy sum carries those coordinates with the same N(0, z^2 C^2) noise as the model's.
#[derive(Debug, Clone)]
pub struct GradientCanaries {
    /// Which canaries are in the training set.
    pub included: Vec<bool>,
    /// Each canary's coordinate of the released noisy sums, summed over the steps (the score of
    /// an auditor who sees every step).
    pub scores: Vec<f64>,
}

impl GradientCanaries {
    /// Canaries with the given inclusions and zero scores.
    pub fn new(included: Vec<bool>) -> Self {
        let scores = vec![0.0; included.len()];
        Self { included, scores }
    }
}

/// Runs DP-SGD at `epsilon` (infinite: no noise, no privacy, for audits), releasing the
/// `canaries`' coordinates of every step when given.
pub fn run(
    problem: &Problem,
    epsilon: f64,
    rng: &mut NoiseRng,
    mut canaries: Option<&mut GradientCanaries>,
) -> Result<Outcome> {
    let s = &problem.settings;
    let n = problem.train.len();
    let clip = s.clip_norm.unwrap_or(match problem.model.curvature() {
        Curvature::Convex { .. } => problem.constants.loss_gradient_bound,
        Curvature::NonConvex => 1.0,
    });
    let (z, privacy) = if epsilon.is_infinite() {
        (0.0, PrivacyReport::new(f64::INFINITY, 0.0, "none", Guarantee::None))
    } else {
        let calibration =
            calibrate_noise_multiplier(&RdpAccountant::default(), epsilon, s.delta, s.sample_rate, s.rounds)?;
        (calibration.noise_multiplier, calibration.report)
    };
    let rate = problem.learning_rate();
    let p = problem.model.dim();
    let rows = problem.rows(&problem.train);
    let mut theta = problem.model.init(rng);
    for _ in 0..s.rounds {
        let noise = rng.gaussian(p, z * clip);
        let lot: Vec<usize> = (0..n).filter(|_| rng.bernoulli(s.sample_rate)).collect();
        let mut sum = rows.gradient_sum(&theta, Some(&lot), Some(clip));
        axpy(1.0, &noise, &mut sum);
        if let Some(c) = canaries.as_deref_mut() {
            let noise = rng.gaussian(c.included.len(), z * clip);
            for ((score, &included), b) in c.scores.iter_mut().zip(&c.included).zip(noise) {
                let sampled = rng.bernoulli(s.sample_rate);
                *score += b + if included && sampled { clip } else { 0.0 };
            }
        }
        // Divided by the expected lot size q n (not the drawn one, which is private).
        let step = regularized(&theta, s.lambda, sum, s.sample_rate * n as f64);
        axpy(-rate, &step, &mut theta);
        project_ball(&mut theta, problem.constants.radius);
    }
    Ok(Outcome {
        theta,
        privacy,
        noise_std: z * clip,
        notes: vec![format!(
            "noise multiplier {z:.4}, clip norm {clip:.4}, Poisson rate {}, {} steps",
            s.sample_rate, s.rounds
        )],
        private_data: None,
    })
}
