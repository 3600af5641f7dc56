//! `--mechanism optimized`, Xiang et al.'s allocation made sound (docs/MECHANISMS.md, "The
//! optimized additive noise mechanism"): each DP layer g is clipped to C_g = C / sqrt(G) and gets
//! its own sigma_g from Xiang et al.'s solver (one sphere of radius C_g per layer), under
//! sum_g C_g^2 / sigma_g^2 = 1 / z^2, so the step is exactly the Gaussian mechanism with noise
//! multiplier z. The weights W_g = sum |w_i| over the layer come from an average of past released
//! noisy gradients (post-processing, free); before any release, W_g = layer size.

use super::registered::Registered;
use super::{Mechanism, MechanismName};
use crate::clipping::Clipping;
use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use crate::privacy::mechanism::allocation::{DataGradient, NoiseAllocation, StepNoise, f32_at_least};
use crate::privacy::settings::PrivacySettings;
use crate::tensor_io::to_host;
use burn::tensor::Tensor;
use dp_kernels::NoiseScale;
use dp_kernels::sigma_solver::{Block, SolverSchedule, solve};
use std::sync::Arc;

/// Weight of the past in the average of released gradients that sets W_g: about the last ten
/// releases, so the noise in W shrinks about threefold against a single release.
const RELEASE_DECAY: f64 = 0.9;

/// Iterations of the group solver: the problem has one variable per layer, so running it to
/// 1e-4 of the closed form costs microseconds.
const GROUP_ITERATIONS: usize = 2000;

/// The registry's entry: no options.
pub(super) const REGISTERED: Registered =
    Registered { name: MechanismName::Optimized, options: &[], build: |_| Ok(Arc::new(Optimized)) };

/// The sound optimized additive noise mechanism.
pub struct Optimized;

impl Mechanism for Optimized {
    fn name(&self) -> &'static str {
        "optimized"
    }

    fn default_clipping(&self) -> Clipping {
        Clipping::PerLayer
    }

    fn validate(&self, _config: &PrivacySettings, clipping: Clipping) -> Result<()> {
        if clipping == Clipping::Flat {
            return Err(EngineError::invalid(
                "clipping",
                "optimized earns its per-layer noise from per-layer clipping; flat clipping would make it plain DP-SGD",
            ));
        }
        Ok(())
    }

    fn allocation(&self, z: f64, config: &PrivacySettings, table: &ParamTable) -> Box<dyn NoiseAllocation> {
        let layers = table.layers().len();
        Box::new(Groups {
            noise_multiplier: z,
            bounds: vec![Clipping::PerLayer.layer_bound(config.clip_norm, layers); layers],
            released: None,
        })
    }

    fn notes(&self) -> Vec<String> {
        vec!["optimized: per-layer clipping, a sigma per layer with sum_g C_g^2 / sigma_g^2 = 1 / z^2 (exactly the Gaussian mechanism with noise multiplier z), allocated from past released gradients (post-processing)".into()]
    }
}

/// One sigma per DP layer (all its parameters), and the average of the released gradients that
/// weighs the layers.
struct Groups {
    /// The calibrated noise multiplier z the step must match.
    noise_multiplier: f64,
    /// Per-layer clipping bounds C_g.
    bounds: Vec<f64>,
    /// Average of the released noisy gradients, per parameter (None before the first release).
    released: Option<Vec<Tensor<1>>>,
}

impl NoiseAllocation for Groups {
    fn step_noise(&mut self, _step: u64, table: &ParamTable, _: &mut DataGradient<'_>) -> Result<StepNoise> {
        let params = table.params();
        let mut weights = vec![0.0; table.layers().len()];
        match &self.released {
            // One read from the device: sum |w| of every tensor, then per layer.
            Some(avg) => {
                let sums = Tensor::cat(avg.iter().map(|t| t.clone().abs().sum()).collect(), 0);
                for (p, s) in params.iter().zip(to_host(&sums)) {
                    weights[p.layer] += f64::from(s);
                }
            }
            None => params.iter().for_each(|p| weights[p.layer] += p.len() as f64),
        }
        let sigma = group_sigmas(&weights, &self.bounds, self.noise_multiplier)?;
        let scales = params.iter().map(|p| NoiseScale::Uniform(sigma[p.layer])).collect();
        Ok(StepNoise { scales, noise_multiplier: self.noise_multiplier })
    }

    fn observe(&mut self, released: &[Tensor<1>]) {
        self.released = Some(match self.released.take() {
            None => released.to_vec(),
            Some(a) => a
                .into_iter()
                .zip(released)
                .map(|(a, g)| a.mul_scalar(RELEASE_DECAY) + g.clone().mul_scalar(1.0 - RELEASE_DECAY))
                .collect(),
        });
    }

    fn is_stateful(&self) -> bool {
        true
    }

    fn state(&self) -> Option<&[Tensor<1>]> {
        self.released.as_deref()
    }

    fn restore(&mut self, state: Vec<Tensor<1>>) -> Result<()> {
        self.released = Some(state);
        Ok(())
    }
}

/// sigma_g (f32, never rounded down) for layer weights W_g and bounds C_g with
/// sum_g C_g^2 / sigma_g^2 = 1 / z^2, from the solver on one sphere of radius C_g per layer.
pub fn group_sigmas(weights: &[f64], bounds: &[f64], noise_multiplier: f64) -> Result<Vec<f32>> {
    if weights.len() != bounds.len() || weights.is_empty() {
        return Err(EngineError::invalid("groups", format!("{} weights for {} groups", weights.len(), bounds.len())));
    }
    // A layer whose released gradient is exactly zero would get infinite noise; a floor at
    // 1e-12 of the largest weight keeps sigma finite (any sigma meeting the constraint is private).
    let top = weights.iter().copied().fold(0.0, f64::max).max(f64::MIN_POSITIVE);
    let weights: Vec<f64> = weights.iter().map(|w| w.max(top * 1e-12)).collect();
    let blocks: Vec<Block> = bounds.iter().enumerate().map(|(g, &c)| Block { start: g, len: 1, radius: c }).collect();
    let schedule = SolverSchedule { iterations: GROUP_ITERATIONS, ..SolverSchedule::default() };
    let tau = 1.0 / (noise_multiplier * noise_multiplier);
    let sigma = solve(&weights, &blocks, tau, &schedule).map_err(EngineError::privacy)?;
    Ok(sigma.into_iter().map(f32_at_least).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dp_kernels::sigma_solver::group_closed_form;

    #[test]
    fn group_sigmas_match_the_closed_form_and_the_noise_multiplier() {
        let z = 1.3;
        let bounds = [0.5; 4];
        let weights = [120.0, 3.5, 900.0, 0.25];
        let got = group_sigmas(&weights, &bounds, z).unwrap();
        let want = group_closed_form(&weights, &bounds, 1.0 / (z * z));
        for (g, w) in got.iter().zip(&want) {
            assert!((f64::from(*g) - w).abs() / w < 1e-4, "{got:?} vs {want:?}");
        }
        // The f32 sigmas never buy privacy below z: sum C_g^2 / sigma_g^2 <= 1 / z^2.
        let h: f64 = got.iter().zip(&bounds).map(|(s, c)| c * c / (f64::from(*s) * f64::from(*s))).sum();
        assert!(h <= 1.0 / (z * z), "{h} > {}", 1.0 / (z * z));
        assert!(h > (1.0 - 1e-6) / (z * z), "the constraint should be tight: {h}");
    }

    #[test]
    fn equal_weights_per_bound_give_the_uniform_sigma() {
        // Equal W_g and C_g: sigma_g = z sqrt(sum C_g^2) = z C, plain DP-SGD with per-layer clipping.
        let z = 0.8;
        let got = group_sigmas(&[5.0; 3], &[1.0 / 3f64.sqrt(); 3], z).unwrap();
        for s in got {
            assert!((f64::from(s) - z).abs() < 1e-4 * z, "{s}");
        }
    }
}
