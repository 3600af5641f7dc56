//! What [`crate::engine::builder::PrivacyEngine::make_private`] returns: a user's burn-optim
//! optimiser wrapped so that every step is a DP step (Opacus's `DPOptimizer`). Each call to
//! [`DpOptimizer::step`] samples a Poisson lot, clips each example's gradient, adds the
//! calibrated noise and records the ledger entry, post-processes, and steps the optimiser; the
//! epsilon spent so far comes from the ledger, with its guarantee label. Steps beyond the plan
//! are refused: the run's epsilon was calibrated for the planned number.

use crate::backend::SelectedDevice;
use crate::checkpoint::format::DpCheckpoint;
use crate::checkpoint::keys::StreamKeys;
use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use crate::lots::batching::Batching;
use crate::lots::source::{LotMetrics, LotSource};
use crate::optim::parameter_average::ParameterAverage;
use crate::optim::rules::update_rule;
use crate::privacy::accounting::sigma_privacy;
use crate::privacy::config::PrivacyConfig;
use crate::privacy::plan::Plan;
use crate::step::hook::StepHook;
use crate::step::{self, LotStep, StepState};
use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::tensor::Device;
use dp_accounting::{PrivacyLedger, PrivacyReport};

/// Where a run's step starts from: a fresh run's empty ledger and new sampler, or a checkpoint's.
pub(crate) struct StartFrom<M> {
    /// The keys of the sampler's and the noise's streams.
    pub keys: StreamKeys,
    /// Sampler, noise stream, ledger and allocation state.
    pub state: StepState,
    /// Steps already taken.
    pub steps_taken: u64,
    /// The parameter average so far, when the run keeps one.
    pub average: Option<ParameterAverage<M>>,
    /// The digest of the examples the run trains on, as it started.
    pub data: Option<String>,
}

/// A burn-optim optimiser whose every step is a recorded DP step on lots of a [`LotSource`].
pub struct DpOptimizer<M> {
    config: PrivacyConfig,
    plan: Plan,
    notes: Vec<String>,
    step: Box<dyn LotStep<M>>,
    optimizer: ModuleOptimizer,
    steps_taken: u64,
    keys: StreamKeys,
    device: Device,
    average: Option<ParameterAverage<M>>,
    table: ParamTable,
    data: Option<String>,
}

impl<M: Module> DpOptimizer<M> {
    /// The optimiser of a run of `config` as `plan` says, for a model of `table`, in physical
    /// batches of `batch_size`, continuing from `start`.
    pub(crate) fn assemble(
        config: PrivacyConfig,
        plan: Plan,
        table: &ParamTable,
        optimizer: ModuleOptimizer,
        start: StartFrom<M>,
        batch_size: usize,
        device: &SelectedDevice,
    ) -> Result<Self> {
        config.mechanism.accepts_update(update_rule(&optimizer, &device.device)?)?;
        let batching = Batching::for_device(batch_size, device);
        let step = step::for_run(&config, plan.z, table, batching, start.state)?;
        let notes = crate::privacy::plan::notes(&config);
        Ok(Self {
            config,
            plan,
            notes,
            step,
            optimizer,
            steps_taken: start.steps_taken,
            keys: start.keys,
            device: device.device.clone(),
            average: start.average,
            table: table.clone(),
            data: start.data,
        })
    }

    /// One DP step of `model` at learning rate `lr` on a lot drawn from `source`: the updated
    /// model (in training state) and the lot's training metrics (on the private data: not DP, do
    /// not publish them).
    /// Refused once the planned steps are taken.
    pub fn step(&mut self, model: M, source: &dyn LotSource<M>, lr: f64) -> Result<(M, LotMetrics)> {
        if self.is_done() {
            return Err(EngineError::privacy(format!(
                "the run planned {} steps and has taken them: another would spend more than {}",
                self.plan.planned_steps, self.plan.privacy
            )));
        }
        if !(lr.is_finite() && lr >= 0.0) {
            return Err(EngineError::invalid("learning rate", format!("{lr} is not a non-negative number")));
        }
        // A model moved after make_private would fail deep inside Burn with its own message.
        if let Some(other) = model.devices().into_iter().find(|d| *d != self.device) {
            return Err(EngineError::invalid(
                "model",
                format!(
                    "it is on {other:?}, but make_private set the run up on {:?}: keep the model on the run's device (move it back with Module::to_device), or make_private on the other",
                    self.device
                ),
            ));
        }
        source.at_step(self.steps_taken);
        // burn-optim updates autodiff parameters: a model built on a plain device is switched,
        // and one moved since its last step (`to_device` records the move in its graph) has its
        // parameters made leaves again.
        let out = self.step.step(model.valid().train(), &mut self.optimizer, lr, source, &self.device)?;
        self.steps_taken += 1;
        if let Some(average) = &mut self.average {
            average.update(&out.0);
        }
        Ok(out)
    }

    /// Keeps an exponential moving average of the parameters with `decay` (and De et al.'s
    /// warm-up), updated after every step: post-processing, so the same epsilon. Refused once a
    /// step is taken (the average covers the whole run).
    pub fn set_parameter_averaging(&mut self, decay: f64) -> Result<()> {
        if self.steps_taken > 0 {
            return Err(EngineError::invalid("ema", "parameter averaging starts before the first step"));
        }
        self.average = Some(ParameterAverage::new(decay)?);
        Ok(())
    }

    /// The averaged model, when the run keeps an average and has taken a step: what to evaluate
    /// and release instead of the last iterate.
    pub fn averaged(&self) -> Option<&M> {
        self.average.as_ref().and_then(ParameterAverage::average)
    }

    /// The parameters the run trains, and those it keeps frozen.
    pub fn table(&self) -> &ParamTable {
        &self.table
    }

    /// The run's plan: steps, sampling rate, noise multiplier, clipping and planned privacy.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Installs a hook into every private step (an auditor's white-box canaries,
    /// instrumentation): it sees the clipped sums and each release and may add records of its
    /// own. Refused once a step is taken (a hook sees the whole run) and for the unperturbed
    /// baseline, which releases nothing.
    pub fn set_hook(&mut self, hook: Box<dyn StepHook>) -> Result<()> {
        if self.steps_taken > 0 {
            return Err(EngineError::invalid(
                "hook",
                "a hook joins before the first step, so that it sees every release",
            ));
        }
        self.step.set_hook(hook)
    }

    /// Steps the run plans (what its epsilon was calibrated for).
    pub fn planned_steps(&self) -> u64 {
        self.plan.planned_steps
    }

    /// Steps taken so far.
    pub fn steps_taken(&self) -> u64 {
        self.steps_taken
    }

    /// True once every planned step is taken.
    pub fn is_done(&self) -> bool {
        self.steps_taken >= self.plan.planned_steps
    }

    /// The noise multiplier z (noise std z C), given or calibrated; None for the baseline.
    pub fn noise_multiplier(&self) -> Option<f64> {
        self.plan.z
    }

    /// The sampling rate q = lot size / N of the Poisson lots.
    pub fn sample_rate(&self) -> f64 {
        self.plan.sample_rate
    }

    /// What the whole planned run spends, with its label.
    pub fn planned_privacy(&self) -> &PrivacyReport {
        &self.plan.privacy
    }

    /// Beside a paper's claim, the accountant's readout of the whole planned run (optimized-paper
    /// only).
    pub fn planned_sigma_privacy(&self) -> Option<&PrivacyReport> {
        self.plan.sigma_privacy.as_ref()
    }

    /// What the steps taken so far spent, from the ledger, with its label.
    pub fn privacy(&self) -> Result<PrivacyReport> {
        self.config.mechanism.privacy(&self.config.settings, self.step.ledger(), self.plan.planned_steps)
    }

    /// Beside a paper's claim, the accountant's readout of the steps so far (optimized-paper: the
    /// epsilon of its smallest sigma, label none).
    pub fn sigma_privacy(&self) -> Result<Option<PrivacyReport>> {
        sigma_privacy(&self.config.settings, self.step.ledger(), self.plan.privacy.guarantee)
    }

    /// The run's caveats (shuffled lots, a seeded run, the mechanism's own): print them.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Adds the caveats found by `make_private`'s dry run.
    pub(crate) fn add_notes(&mut self, notes: impl IntoIterator<Item = String>) {
        self.notes.extend(notes);
    }

    /// Every privatised step so far.
    pub fn ledger(&self) -> &PrivacyLedger {
        self.step.ledger()
    }

    /// The sampler, noise-stream and allocation state a checkpoint keeps.
    pub fn state(&self) -> StepState {
        self.step.state()
    }

    /// The checkpoint of this run at `model` (the model its last step returned): resumed with
    /// [`crate::engine::builder::PrivacyEngine::resume`] and the run's [`Self::keys`], it
    /// continues exactly where this run is.
    pub fn checkpoint(&self, model: &M) -> Result<DpCheckpoint> {
        let (step, planned) = (self.steps_taken, self.plan.planned_steps);
        DpCheckpoint::capture(
            model,
            &self.optimizer,
            self.step.state(),
            self.average.as_ref(),
            (step, planned),
            (&self.keys, self.data.clone()),
        )
    }

    /// The keys of the lot sampler's and the noise's streams: secret unless the run is seeded
    /// (anyone holding them can regenerate the noise); a checkpoint is resumed with them.
    pub fn keys(&self) -> &StreamKeys {
        &self.keys
    }

    /// The wrapped burn-optim optimiser (its record goes into a checkpoint).
    pub fn optimizer(&self) -> &ModuleOptimizer {
        &self.optimizer
    }

    /// The hook into the private steps (an audited run's canaries), to read what it found.
    pub fn hook(&self) -> Option<&dyn StepHook> {
        self.step.hook()
    }
}
