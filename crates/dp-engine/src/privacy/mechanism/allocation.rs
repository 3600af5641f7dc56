//! How the noise of a DP step is spread over the parameters: the trait a mechanism's per-step
//! allocation implements (its state, what a checkpoint keeps of it, how it is restored), and the
//! uniform allocation of DP-SGD and DP-LSSGD (sigma = z C everywhere). The allocations with state
//! live in their mechanism's file: per-layer sigmas in `mechanism::optimized`, Xiang et al.'s
//! per-coordinate sphere in `mechanism::optimized_paper` (docs/MECHANISMS.md, "The optimized
//! additive noise mechanism").

use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use burn::tensor::Tensor;
use dp_kernels::NoiseScale;

/// The noise of one step: a scale per parameter tensor and the noise multiplier the accountant
/// records for it.
#[derive(Debug, Clone)]
pub struct StepNoise {
    /// Per parameter, in the order of the model's `ParamTable`.
    pub scales: Vec<NoiseScale>,
    /// The step's noise multiplier (z for uniform and groups; min sigma / C for the sphere).
    pub noise_multiplier: f64,
}

/// The full-data mean gradient of the model being trained (one tensor per parameter), computed
/// only when an allocation asks for it: Xiang et al.'s model sensitivity w.
pub type DataGradient<'a> = dyn FnMut() -> Result<Vec<Tensor<1>>> + 'a;

/// A mechanism's per-step noise allocation and the state it keeps between steps.
pub trait NoiseAllocation: Send {
    /// The noise of step `step` (0-based) for the parameters of `table`; `data_gradient` gives
    /// the full-data gradient when the allocation needs it.
    fn step_noise(&mut self, step: u64, table: &ParamTable, data_gradient: &mut DataGradient<'_>) -> Result<StepNoise>;

    /// Takes in the step's released (noisy, averaged) gradient: free post-processing.
    fn observe(&mut self, _released: &[Tensor<1>]) {}

    /// True when the allocation carries state from step to step (which a checkpoint keeps
    /// once the first step is taken).
    fn is_stateful(&self) -> bool {
        false
    }

    /// The state a checkpoint keeps, one tensor per parameter (None before the first step).
    fn state(&self) -> Option<&[Tensor<1>]> {
        None
    }

    /// Continues from a checkpoint's `state` (as [`Self::state`] gave it), refused when this
    /// allocation keeps none or the state could not have been produced.
    fn restore(&mut self, _state: Vec<Tensor<1>>) -> Result<()> {
        Err(EngineError::privacy("this noise allocation keeps no state, but one was given"))
    }

    /// The noise multiplier the current state gives, where it varies with the state (the
    /// sphere's current sigma): what the last ledger entry of a checkpoint must record.
    fn current_multiplier(&self) -> Option<f64> {
        None
    }
}

/// The same sigma = z C for every coordinate.
#[derive(Debug, Clone, Copy)]
pub struct Uniform {
    /// Noise multiplier z.
    pub noise_multiplier: f64,
    /// Clipping bound C.
    pub clip_norm: f64,
}

impl NoiseAllocation for Uniform {
    fn step_noise(&mut self, _step: u64, table: &ParamTable, _: &mut DataGradient<'_>) -> Result<StepNoise> {
        Ok(StepNoise {
            scales: vec![
                NoiseScale::Uniform(f32_at_least(self.noise_multiplier * self.clip_norm));
                table.params().len()
            ],
            noise_multiplier: self.noise_multiplier,
        })
    }
}

/// The smallest f32 not below `x` (a non-negative sigma), so that rounding never lowers a noise
/// level: one ulp up (the next bit pattern, for a non-negative float) when rounding went down.
pub fn f32_at_least(x: f64) -> f32 {
    let r = x as f32;
    if f64::from(r) < x { f32::from_bits(r.to_bits() + 1) } else { r }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_never_lowers_sigma() {
        for x in [0.1, 1.0 / 3.0, std::f64::consts::E, 1e-7, 0.0] {
            assert!(f64::from(f32_at_least(x)) >= x);
        }
    }
}
