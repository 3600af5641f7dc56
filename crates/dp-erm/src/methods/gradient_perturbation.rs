//! The certified gradient-perturbation baseline: DP-SGD with Poisson sampling at rate q, every
//! per-example loss gradient clipped to C (the regularizer's gradient is data-independent and
//! added after the noise), N(0, z^2 C^2 I) per step, z calibrated by the RDP accountant. It is
//! the engine's DP-SGD on a table: the engine's lot sampler, its clipping formula
//! (`dp_kernels::clipping`, through `RowSums`) and its noise stream (the fused noise kernel), each
//! keyed by a full-strength fork of the run's generator. An auditor may add white-box gradient
//! canaries (Steinke, Nasr and Jagielski 2023, Section 7): their coordinates are released with
//! the model's, in the same noisy vector.

use super::cost::Cost;
use super::{Outcome, Problem, non_private};
use crate::error::{ErmError, Result};
use crate::linalg::{axpy, project_ball};
use crate::model::Curvature;
use crate::objective::regularized;
use crate::rng::NoiseRng;
use burn::tensor::Device;
use dp_accounting::{RdpAccountant, calibrate_noise_multiplier};
use dp_data::{LotSampler, Sampling};
use dp_kernels::NoiseScale;
use dp_kernels::noise::GaussianNoise;
use dp_kernels::tensor_io::{to_host, vector};

/// The streams of a run's forks: lots and noise.
const LOT_STREAM: u64 = 0;
const NOISE_STREAM: u64 = 1;

/// `values` plus N(0, sigma^2) per coordinate from the engine's noise stream.
fn noisy(noise: &mut GaussianNoise, values: Vec<f64>, sigma: f64, device: &Device) -> Result<Vec<f64>> {
    let t = vector(values.into_iter().map(|v| v as f32).collect(), device);
    let out =
        noise.perturb(t, &NoiseScale::Uniform(sigma as f32), 1.0).map_err(|e| ErmError::Numerical(e.to_string()))?;
    Ok(to_host(&out).into_iter().map(f64::from).collect())
}

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

/// A run: T Poisson lots of qn rows, each row's gradient clipped (about twice a plain pass).
pub fn cost(problem: &Problem) -> Cost {
    Cost::per_run(2.0 * problem.settings.rounds as f64 * problem.settings.sample_rate)
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
        (0.0, non_private(s.delta)?)
    } else {
        let calibration =
            calibrate_noise_multiplier(&RdpAccountant::default(), epsilon, s.delta, s.sample_rate, s.rounds)?;
        (calibration.noise_multiplier, calibration.report)
    };
    let rate = problem.learning_rate();
    let p = problem.model.dim();
    let rows = problem.rows(&problem.train);
    let mut theta = problem.model.init(rng);
    let mut sampler = LotSampler::with_stream(Sampling::Poisson { rate: s.sample_rate }, n, rng.fork(LOT_STREAM))?;
    let mut noise = GaussianNoise::from_state(rng.fork(NOISE_STREAM));
    let device = dp_kernels::backend::cpu().device;
    for _ in 0..s.rounds {
        let lot = sampler.next_lot();
        let mut sum = rows.gradient_sum(&theta, Some(&lot), Some(clip));
        // The canaries' coordinates (C when a canary is in and sampled) join the released vector.
        let marks: Vec<f64> = canaries.as_deref().map_or_else(Vec::new, |c| {
            c.included.iter().map(|&inside| if inside && rng.bernoulli(s.sample_rate) { clip } else { 0.0 }).collect()
        });
        sum.extend(marks);
        let mut released = noisy(&mut noise, sum, z * clip, &device)?;
        if let Some(c) = canaries.as_deref_mut() {
            for (score, b) in c.scores.iter_mut().zip(released.split_off(p)) {
                *score += b;
            }
        }
        // Divided by the expected lot size q n (not the drawn one, which is private).
        let step = regularized(&theta, s.lambda, released, s.sample_rate * n as f64);
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
