//! The unperturbed baseline: ordinary Burn training of the module, Burn's autodiff parameter
//! gradients of the mean loss over the lot, then the optimiser. No tape, no taps, no clipping,
//! no noise, no privacy: each step is recorded as a non-private release. Frozen parameters get no
//! gradient, as in the private step.

use super::{LotStep, StepState};
use crate::error::Result;
use crate::host::phases::{Phase, timed};
use crate::lots::batching::Batching;
use crate::lots::source::{LotMetrics, LotSource, batch_losses};
use burn::module::{Module, ParamId};
use burn::optim::{GradientsAccumulator, GradientsParams, ModuleOptimizer};
use burn::tensor::Device;
use dp_accounting::{DpEvent, PrivacyLedger};
use dp_data::LotSampler;

/// Plain (non-private) training steps over lots drawn by `sampler`.
pub struct PlainStep {
    /// Draws the lots.
    pub sampler: LotSampler,
    /// Physical batches.
    pub batching: Batching,
    /// Every step so far, each a non-private release.
    pub ledger: PrivacyLedger,
    /// What a step releases (the mechanism's event: the unperturbed gradient).
    pub event: DpEvent,
    /// The parameters trained (the frozen ones apart).
    pub trained: Vec<ParamId>,
}

impl<M: Module> LotStep<M> for PlainStep {
    fn step(
        &mut self,
        model: M,
        optimizer: &mut ModuleOptimizer,
        lr: f64,
        source: &dyn LotSource<M>,
        device: &Device,
    ) -> Result<(M, LotMetrics)> {
        let lot = self.sampler.next_lot();
        let mut metrics = LotMetrics { examples: lot.len(), ..LotMetrics::default() };
        let mut accumulated = GradientsAccumulator::<M>::new();
        let n = lot.len() as f64;
        let batching = self.batching.for_views(source.views());
        for chunk in lot.chunks(batching.size.max(1)) {
            let out =
                timed(Phase::Forward, || batch_losses(source, &model, chunk, batching.padded(chunk.len()), device))?;
            let loss = out.weighted.sum();
            metrics.add(loss.clone().inner(), out.correct);
            timed(Phase::Backward, || {
                let grads = GradientsParams::from_params(&mut loss.div_scalar(n).backward(), &model, &self.trained);
                accumulated.accumulate(&model, grads);
            });
        }
        let model = if lot.is_empty() {
            model
        } else {
            timed(Phase::Update, || optimizer.step(lr, model, accumulated.grads()))
        };
        self.ledger.record_event(self.event.clone(), 1)?;
        Ok((model, metrics))
    }

    fn state(&self) -> StepState {
        StepState { sampler: self.sampler.clone(), noise: None, ledger: self.ledger.clone(), allocation: None }
    }

    fn ledger(&self) -> &PrivacyLedger {
        &self.ledger
    }
}
