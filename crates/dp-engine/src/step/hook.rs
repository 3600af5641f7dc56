//! A hook into the private step, for audits and instrumentation: it sees each stage of a step
//! and may add records of its own (an auditor's white-box canaries, `crate::step::canaries`), never
//! touch the noise or the ledger. The production step knows no canary: an audited run passes its
//! canaries as the hook.

use crate::error::Result;
use burn::tensor::Tensor;
use dp_kernels::NoiseScale;
use std::any::Any;

/// What a private step lets a hook see and add, in the order the step runs.
pub trait StepHook: Send {
    /// Adds the hook's own records to the lot's clipped sums (one tensor per parameter), before
    /// the noise: they are released as the data's records are.
    fn add_records(&mut self, _sums: &mut [Tensor<1>]) -> Result<()> {
        Ok(())
    }

    /// The full-data mean gradient `w` over `n` examples with the hook's records counted (for a
    /// mechanism that reads it).
    fn add_to_mean(&self, w: Vec<Tensor<1>>, _n: usize) -> Vec<Tensor<1>> {
        w
    }

    /// Sees the step's release ((sum + noise) times `scale` = 1 / qN) and its noise `scales`.
    fn released(&mut self, _released: &[Tensor<1>], _scales: &[NoiseScale], _scale: f32) -> Result<()> {
        Ok(())
    }

    /// The hook itself, to read what it found after the run (`downcast_ref`).
    fn as_any(&self) -> &dyn Any;
}
