//! How the noise of a DP step is spread over the parameters (docs/ARCHITECTURE.md, "The optimized
//! additive noise mechanism"):
//!
//! - `Uniform`: sigma = z C everywhere (DP-SGD, DP-LSSGD).
//! - `Groups` (`--mechanism optimized`, sound): each DP layer g is clipped to C_g = C / sqrt(G)
//!   and gets its own sigma_g from Xiang et al.'s solver (one sphere of radius C_g per layer), under
//!   sum_g C_g^2 / sigma_g^2 = 1 / z^2: the step is exactly the Gaussian mechanism with noise
//!   multiplier z. The weights W_g = sum |w_i| over the layer come from an average of past
//!   released noisy gradients (post-processing, free); before any release, W_g = layer size.
//! - `Sphere` (`--mechanism optimized-paper`): Xiang et al.'s Algorithm 1: per-coordinate sigma from
//!   the solver on the fused device kernel under L2 clipping (one sphere of radius C) and the
//!   per-step condition tau, w the full-data gradient recomputed every `every` lots. Its true
//!   noise multiplier is min sigma / C (docs/ARCHITECTURE.md, "The optimized additive noise
//!   mechanism").

use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use crate::tensor_io::to_host;
use burn::tensor::Tensor;
use dp_kernels::sigma_solver::{Block, SolverSchedule, solve};
use dp_kernels::{NoiseScale, sphere_sigma};

/// Weight of the past in the average of released gradients that sets W_g: about the last ten
/// releases, so the noise in W shrinks about threefold against a single release.
const RELEASE_DECAY: f64 = 0.9;

/// Iterations of the group solver: the problem has one variable per layer, so running it to
/// 1e-4 of the closed form costs microseconds.
const GROUP_ITERATIONS: usize = 2000;

/// The noise allocation of a run and the state it keeps between steps.
#[derive(Debug, Clone)]
pub enum NoiseAllocation {
    /// The same sigma for every coordinate.
    Uniform {
        /// Noise multiplier z.
        noise_multiplier: f64,
        /// Clipping bound C.
        clip_norm: f64,
    },
    /// One sigma per DP layer (all its parameters), the sound optimized mechanism.
    Groups {
        /// The calibrated noise multiplier z the step must match.
        noise_multiplier: f64,
        /// Per-layer clipping bounds C_g.
        bounds: Vec<f64>,
        /// Average of the released noisy gradients, per parameter (None before the first release).
        released: Option<Vec<Tensor<1>>>,
    },
    /// One sigma per coordinate from the paper's solver.
    Sphere {
        /// Clipping bound alpha = C.
        alpha: f64,
        /// Per-step condition tau (corrected).
        tau: f64,
        /// Recompute w every this many lots.
        every: u64,
        /// Per-tensor sigma of the current w, and the noise multiplier min sigma / alpha.
        current: Option<(Vec<Tensor<1>>, f64)>,
    },
}

/// The noise of one step: a scale per parameter tensor and the noise multiplier the accountant
/// records for it.
#[derive(Debug, Clone)]
pub struct StepNoise {
    /// Per parameter, in the order of the model's `ParamTable`.
    pub scales: Vec<NoiseScale>,
    /// The step's noise multiplier (z for uniform and groups; min sigma / C for the sphere).
    pub noise_multiplier: f64,
}

/// The smallest f32 not below `x` (a non-negative sigma), so that rounding never lowers a noise
/// level: one ulp up (the next bit pattern, for a non-negative float) when rounding went down.
fn f32_at_least(x: f64) -> f32 {
    let r = x as f32;
    if f64::from(r) < x { f32::from_bits(r.to_bits() + 1) } else { r }
}

impl NoiseAllocation {
    /// The noise of step `step` for the parameters of `table`; `sensitivity` computes the
    /// full-data gradient (one tensor per parameter) when the sphere needs a new w.
    pub fn step_noise(
        &mut self,
        step: u64,
        table: &ParamTable,
        sensitivity: &mut dyn FnMut() -> Result<Vec<Tensor<1>>>,
    ) -> Result<StepNoise> {
        let params = table.params();
        match self {
            NoiseAllocation::Uniform { noise_multiplier, clip_norm } => Ok(StepNoise {
                scales: vec![NoiseScale::Uniform(f32_at_least(*noise_multiplier * *clip_norm)); params.len()],
                noise_multiplier: *noise_multiplier,
            }),
            NoiseAllocation::Groups { noise_multiplier, bounds, released } => {
                let mut weights = vec![0.0; table.layers().len()];
                match released {
                    // One read from the device: sum |w| of every tensor, then per layer.
                    Some(avg) => {
                        let sums = Tensor::cat(avg.iter().map(|t| t.clone().abs().sum()).collect(), 0);
                        for (p, s) in params.iter().zip(to_host(&sums)) {
                            weights[p.layer] += f64::from(s);
                        }
                    }
                    None => params.iter().for_each(|p| weights[p.layer] += p.len() as f64),
                }
                let sigma = group_sigmas(&weights, bounds, *noise_multiplier)?;
                let scales = params.iter().map(|p| NoiseScale::Uniform(sigma[p.layer])).collect();
                Ok(StepNoise { scales, noise_multiplier: *noise_multiplier })
            }
            NoiseAllocation::Sphere { alpha, tau, every, current } => {
                if current.is_none() || step.is_multiple_of(*every) {
                    let w = sensitivity()?;
                    let flat = Tensor::cat(w.into_iter().map(|t| t.abs()).collect(), 0);
                    let sigma = sphere_sigma(flat, *alpha, *tau, &SolverSchedule::default())
                        .map_err(EngineError::Unsupported)?;
                    let least = f64::from(sigma.clone().min().into_scalar::<f32>());
                    if !(least.is_finite() && least > 0.0) {
                        return Err(EngineError::Privacy(format!("the solver returned a minimum sigma of {least}")));
                    }
                    let mut start = 0;
                    let per_tensor = params
                        .iter()
                        .map(|p| {
                            let n = p.len();
                            start += n;
                            sigma.clone().slice(start - n..start)
                        })
                        .collect();
                    *current = Some((per_tensor, least / *alpha));
                }
                let (sigma, z) = current.as_ref().ok_or_else(|| EngineError::Privacy("no sigma".into()))?;
                Ok(StepNoise {
                    scales: sigma.iter().map(|s| NoiseScale::PerCoordinate(Box::new(s.clone()))).collect(),
                    noise_multiplier: *z,
                })
            }
        }
    }

    /// Takes in the step's released (noisy, averaged) gradient.
    pub fn observe(&mut self, released: &[Tensor<1>]) {
        if let NoiseAllocation::Groups { released: avg, .. } = self {
            *avg = Some(match avg.take() {
                None => released.to_vec(),
                Some(a) => a
                    .into_iter()
                    .zip(released)
                    .map(|(a, g)| a.mul_scalar(RELEASE_DECAY) + g.clone().mul_scalar(1.0 - RELEASE_DECAY))
                    .collect(),
            });
        }
    }

    /// True when the allocation carries state from step to step (which a checkpoint keeps
    /// once the first step is taken).
    pub fn is_stateful(&self) -> bool {
        !matches!(self, NoiseAllocation::Uniform { .. })
    }

    /// The state a checkpoint keeps, one tensor per parameter: the groups' average of released
    /// gradients, or the sphere's current sigma (None before the first step).
    pub fn state(&self) -> Option<&[Tensor<1>]> {
        match self {
            NoiseAllocation::Groups { released: Some(avg), .. } => Some(avg),
            NoiseAllocation::Sphere { current: Some((sigma, _)), .. } => Some(sigma),
            _ => None,
        }
    }

    /// The noise multiplier the sphere's current sigma gives (None for the other allocations).
    pub fn current_multiplier(&self) -> Option<f64> {
        match self {
            NoiseAllocation::Sphere { current: Some((_, z)), .. } => Some(*z),
            _ => None,
        }
    }

    /// Continues from a checkpoint's `state` (as [`Self::state`] gave it), refused when this
    /// allocation keeps none or the state could not have been produced (a sigma that is not
    /// positive and finite).
    pub fn restore(&mut self, state: Vec<Tensor<1>>) -> Result<()> {
        match self {
            NoiseAllocation::Uniform { .. } => {
                Err(EngineError::Privacy("the uniform allocation keeps no state, but one was given".into()))
            }
            NoiseAllocation::Groups { released, .. } => {
                *released = Some(state);
                Ok(())
            }
            NoiseAllocation::Sphere { alpha, current, .. } => {
                // Read as the step reads it: the least f32 sigma, divided by alpha.
                let least = state.iter().flat_map(to_host).map(f64::from).fold(f64::INFINITY, f64::min);
                let finite = state.iter().flat_map(to_host).all(f32::is_finite);
                if !(finite && least > 0.0) {
                    return Err(EngineError::Privacy(format!(
                        "a sigma of {least} (or one that is not finite) cannot have been used"
                    )));
                }
                *current = Some((state, least / *alpha));
                Ok(())
            }
        }
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
    let sigma = solve(&weights, &blocks, tau, &schedule).map_err(EngineError::Privacy)?;
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

    #[test]
    fn rounding_never_lowers_sigma() {
        for x in [0.1, 1.0 / 3.0, std::f64::consts::E, 1e-7, 0.0] {
            assert!(f64::from(f32_at_least(x)) >= x);
        }
    }
}
