//! The DP step, in the order it happens: sample a lot; forward it with the tape and clip each
//! example's gradient (`lot::lot_sum`); let the hook add its records (an audit's canaries); add
//! the step's noise and divide by the expected lot size qN, recording the ledger event (the
//! mechanism's: a Gaussian release with its multiplier, on a lot sampled how and at what rate)
//! in the same function, so no noise is released
//! unrecorded; show the hook the release; feed the noise allocation; post-process (smoothing);
//! step the optimiser. The expected lot size, never
//! the realised one, divides: the realised size depends on the data.

use super::hook::StepHook;
use super::{LotStep, StepState, sampling_of};
use crate::error::{EngineError, Result};
use crate::grad_sample::ParamGrad;
use crate::grad_sample::batch::{ClipSpec, gradients_params};
use crate::grad_sample::params::ParamTable;
use crate::host::phases::{Phase, timed};
use crate::lots::batching::Batching;
use crate::lots::source::{LotMetrics, LotSource, lot_sum, mean_gradient};
use crate::noise::GaussianNoise;
use crate::privacy::mechanism::Mechanism;
use crate::privacy::mechanism::allocation::{NoiseAllocation, StepNoise};
use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::tensor::{Device, Tensor};
use dp_accounting::PrivacyLedger;
use dp_data::LotSampler;
use std::sync::Arc;

/// A private run's step and everything it carries between steps.
pub struct PrivateStep {
    /// The mechanism (allocation and post-processing).
    pub mechanism: Arc<dyn Mechanism>,
    /// The model's parameters.
    pub table: ParamTable,
    /// Clipping of each example's gradient.
    pub clip: ClipSpec,
    /// Physical batches.
    pub batching: Batching,
    /// Draws the lots.
    pub sampler: LotSampler,
    /// How the noise is spread over the parameters, and its state.
    pub allocation: Box<dyn NoiseAllocation>,
    /// The noise stream.
    pub noise: GaussianNoise,
    /// Every privatised step so far.
    pub ledger: PrivacyLedger,
    /// A hook into the step (an audited run's canaries).
    pub hook: Option<Box<dyn StepHook>>,
}

impl PrivateStep {
    /// The noise of the next step; an allocation that asks for the full-data gradient gets it
    /// from `model`, with the hook's records counted.
    pub fn next_noise<M>(&mut self, model: &M, source: &dyn LotSource<M>, device: &Device) -> Result<StepNoise> {
        let Self { table, batching, hook, allocation, ledger, .. } = self;
        allocation.step_noise(ledger.total_steps(), table, &mut || {
            let w = mean_gradient(model, source, *batching, table, device)?;
            Ok(match hook.as_ref() {
                Some(h) => h.add_to_mean(w, source.len().max(1)),
                None => w,
            })
        })
    }

    /// 1 / (qN): what the noisy sum is multiplied by (the expected lot size, never the realised).
    fn scale(&self) -> f32 {
        (1.0 / (sampling_of(&self.sampler).1 * self.sampler.population() as f64)) as f32
    }

    /// (sum + noise) / qN for every parameter, and the ledger entry of this release.
    fn release(&mut self, sums: Vec<Tensor<1>>, noise: &StepNoise) -> Result<Vec<Tensor<1>>> {
        let (sampling, rate) = sampling_of(&self.sampler);
        let event = self.mechanism.step_event(Some(noise.noise_multiplier), rate, sampling)?;
        if noise.scales.len() != sums.len() {
            return Err(EngineError::invalid(
                "noise",
                format!("{} scales for {} parameters", noise.scales.len(), sums.len()),
            ));
        }
        let scale = self.scale();
        let released = sums
            .into_iter()
            .zip(&noise.scales)
            .map(|(s, sigma)| self.noise.perturb(s, sigma, scale).map_err(EngineError::Unsupported))
            .collect::<Result<Vec<_>>>()?;
        self.ledger.record_event(event, 1)?;
        Ok(released)
    }
}

impl<M: Module> LotStep<M> for PrivateStep {
    fn step(
        &mut self,
        model: M,
        optimizer: &mut ModuleOptimizer,
        lr: f64,
        source: &dyn LotSource<M>,
        device: &Device,
    ) -> Result<(M, LotMetrics)> {
        let lot = self.sampler.next_lot();
        let inference = model.valid();
        let noise = timed(Phase::Noise, || self.next_noise(&inference, source, device))?;
        let (mut sums, metrics) =
            lot_sum(&inference, source, &lot, self.batching, &self.table, Some(self.clip), device)?;
        if let Some(h) = self.hook.as_mut() {
            h.add_records(&mut sums)?;
        }
        let released = timed(Phase::Noise, || self.release(sums, &noise))?;
        let scale = self.scale();
        if let Some(h) = self.hook.as_mut() {
            h.released(&released, &noise.scales, scale)?;
        }
        let model = timed(Phase::Update, || {
            self.allocation.observe(&released);
            let grads = self.mechanism.post_process(released, &self.table)?;
            let grads = self.table.params().iter().zip(grads).map(|(p, value)| ParamGrad { id: p.id, value }).collect();
            Ok::<_, EngineError>(optimizer.step(lr, model, gradients_params(grads, &self.table)?))
        })?;
        Ok((model, metrics))
    }

    fn state(&self) -> StepState {
        StepState {
            sampler: self.sampler.clone(),
            noise: Some(self.noise.state().clone()),
            ledger: self.ledger.clone(),
            allocation: self.allocation.state().map(<[Tensor<1>]>::to_vec),
        }
    }

    fn ledger(&self) -> &PrivacyLedger {
        &self.ledger
    }

    fn hook(&self) -> Option<&dyn StepHook> {
        self.hook.as_deref()
    }

    fn set_hook(&mut self, hook: Box<dyn StepHook>) -> Result<()> {
        self.hook = Some(hook);
        Ok(())
    }
}
