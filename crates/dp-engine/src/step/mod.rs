//! The training step. A private run takes [`private::PrivateStep`]: sample a lot, run the model's
//! forward pass with the tape, clip each example's gradient, add noise and record the ledger entry
//! in one place, post-process, and hand the result to a burn-optim optimiser. The unperturbed
//! baseline takes [`plain::PlainStep`]: ordinary Burn training of the same module (autodiff
//! parameter gradients, no tape, no clipping), so that time ratios are against what a user runs
//! without DP. Both implement [`LotStep`], which is all `DpOptimizer` and the `dptrain` benchmark see.

pub mod canaries;
pub mod hook;
pub mod independence;
pub mod layer_rules;
pub mod plain;
pub mod private;

use crate::error::{EngineError, Result};
use crate::grad_sample::batch::ClipSpec;
use crate::grad_sample::params::ParamTable;
use crate::lots::batching::Batching;
use crate::lots::source::{LotMetrics, LotSource};
use crate::noise::GaussianNoise;
use crate::privacy::config::PrivacyConfig;
use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::tensor::{Device, Tensor};
use dp_accounting::{LotSampling, PrivacyLedger};
use dp_data::{ChaChaState, LotSampler, Sampling};
use hook::StepHook;

/// What a step carries between steps besides the model and optimiser, as a checkpoint keeps it.
#[derive(Debug, Clone)]
pub struct StepState {
    /// The lot sampler (with its random stream).
    pub sampler: LotSampler,
    /// The noise stream (None for the baseline).
    pub noise: Option<ChaChaState>,
    /// Every privatised step taken (empty for the baseline).
    pub ledger: PrivacyLedger,
    /// The noise allocation's state (`NoiseAllocation::state`), once a step has been taken.
    pub allocation: Option<Vec<Tensor<1>>>,
}

impl StepState {
    /// The state of a run that has taken no step yet: `sampler`, the noise stream `noise` at its
    /// start, an empty ledger.
    pub fn fresh(sampler: LotSampler, noise: ChaChaState) -> Self {
        Self { sampler, noise: Some(noise), ledger: PrivacyLedger::new(), allocation: None }
    }
}

/// One step of a run on a module `M`: a lot from a [`LotSource`], its (privatised) gradient, the
/// optimiser's update (not burn-train's `TrainStep`, which is one batch's forward and loss).
pub trait LotStep<M> {
    /// Draws a lot, computes its (privatised) gradient and updates `model` with `optimizer` at
    /// learning rate `lr`; the lot's training metrics come back with the model.
    fn step(
        &mut self,
        model: M,
        optimizer: &mut ModuleOptimizer,
        lr: f64,
        source: &dyn LotSource<M>,
        device: &Device,
    ) -> Result<(M, LotMetrics)>;

    /// The state to checkpoint.
    fn state(&self) -> StepState;

    /// The privacy ledger so far.
    fn ledger(&self) -> &PrivacyLedger;

    /// The step's hook (an audited run's canaries), if any.
    fn hook(&self) -> Option<&dyn StepHook> {
        None
    }

    /// Installs `hook` into the step; refused where nothing is released (the baseline).
    fn set_hook(&mut self, _hook: Box<dyn StepHook>) -> Result<()> {
        Err(EngineError::invalid("hook", "the unperturbed baseline releases nothing a hook could see"))
    }
}

/// How a sampler draws lots, as the ledger records it, and its rate q.
pub fn sampling_of(sampler: &LotSampler) -> (LotSampling, f64) {
    match sampler.sampling() {
        Sampling::Poisson { rate } => (LotSampling::Poisson, rate),
        Sampling::Shuffled { lot_size } => {
            (LotSampling::Shuffled, lot_size as f64 / sampler.population().max(1) as f64)
        }
    }
}

/// The step of a run of `config`'s mechanism at noise multiplier `z` (None: the baseline's plain
/// step), continuing from `state`.
pub fn for_run<M: Module>(
    config: &PrivacyConfig,
    z: Option<f64>,
    table: &ParamTable,
    batching: Batching,
    state: StepState,
) -> Result<Box<dyn LotStep<M>>> {
    let StepState { sampler, noise, ledger, allocation: kept } = state;
    let Some(z) = z else {
        let (sampling, rate) = sampling_of(&sampler);
        let event = config.mechanism.step_event(None, rate, sampling)?;
        let trained = table.params().iter().map(|p| p.id).collect();
        return Ok(Box::new(plain::PlainStep { sampler, batching, ledger, event, trained }));
    };
    let noise = noise.ok_or_else(|| EngineError::privacy("a private step needs its noise stream"))?;
    let mechanism = config.mechanism.clone();
    let mut allocation = mechanism.allocation(z, &config.settings, table);
    if let Some(state) = kept {
        allocation.restore(state)?;
    }
    Ok(Box::new(private::PrivateStep {
        clip: ClipSpec {
            clip_norm: config.settings.clip_norm,
            clipping: config.clipping(),
            layers: table.layers().len(),
        },
        allocation,
        table: table.clone(),
        batching,
        sampler,
        noise: GaussianNoise::from_state(noise),
        ledger,
        hook: None,
        mechanism,
    }))
}
