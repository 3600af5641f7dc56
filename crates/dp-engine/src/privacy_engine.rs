//! The library entry point, as Opacus's `PrivacyEngine.make_private`: a Burn user's model (an
//! ordinary module built from `crate::nn`'s DP layers), their burn-optim optimiser, their data
//! and loss (a [`LotSource`]) and a privacy target become a [`DpOptimizer`] whose steps are
//! calibrated, Poisson-sampled and ledger-recorded, and which reports the epsilon spent with its
//! guarantee label. Before anything is calibrated for, a dry run on two examples turns the usual
//! mistakes (a loss that is not one per example, a layer without per-example gradients, weight
//! sharing, a shape mismatch in the forward pass) into one-line errors.
//!
//! ```no_run
//! # use dp_engine::privacy_engine::PrivacyEngine;
//! # fn demo<M: burn::module::Module>(model: M, source: &dyn dp_engine::step::lot::LotSource<M>) -> dp_engine::Result<()> {
//! let device = burn::tensor::Device::flex(); // any Burn device: flex, wgpu, ndarray
//! let optimizer = burn::optim::SgdConfig::new().init();
//! let mut dp = PrivacyEngine::new()
//!     .target_epsilon(3.0)
//!     .delta(1e-5)
//!     .clip_norm(1.0)
//!     .lot_size(256)
//!     .epochs(3.0)
//!     .make_private(&model, optimizer, source, &device)?;
//! let mut model = model;
//! while !dp.is_done() {
//!     model = dp.step(model, source, 0.5)?.0;
//! }
//! println!("{}", dp.privacy()?); // epsilon 2.99.. (delta 1e-5, rdp, certified)
//! # Ok(()) }
//! ```

use crate::backend::SelectedDevice;
use crate::clipping::Clipping;
use crate::dp_optimizer::{DpOptimizer, StartFrom};
use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use crate::grad_sample::tape::recording;
use crate::mechanism;
use crate::noise::NOISE_STREAM;
use crate::plan::{fresh_sampler, plan};
use crate::smoothing::SmoothingScope;
use crate::step::StepState;
use crate::step::batching::Batching;
use crate::step::lot::{LotSource, lot_sum};
use crate::train_config::{AccountantName, MechanismName, TrainConfig};
use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::tensor::Device;
use dp_accounting::LotSampling;
use dp_data::ChaChaState;
use dp_data::sampler::SAMPLER_STREAM;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

/// The privacy settings of a run, set one by one, then applied to a model by
/// [`PrivacyEngine::make_private`]. Defaults: DP-SGD (`gaussian`), Poisson lots of 256, one
/// epoch, delta 1e-5, clip norm 1, the RDP accountant, noise keyed from the OS; the noise
/// multiplier or a target epsilon must be given.
#[derive(Debug, Clone)]
pub struct PrivacyEngine {
    config: TrainConfig,
    /// The mechanism-specific options set, by configuration key: refused by `make_private` when
    /// the mechanism does not read them (an option that silently does nothing misleads).
    options_set: Vec<&'static str>,
}

impl Default for PrivacyEngine {
    fn default() -> Self {
        Self::new()
    }
}

/// A builder method setting one field of the run's configuration; `option` marks a field only
/// some mechanisms read.
macro_rules! setting {
    ($(#[$doc:meta])* $name:ident: $ty:ty => $field:ident $(= $wrap:path)?) => {
        $(#[$doc])*
        pub fn $name(mut self, value: $ty) -> Self {
            self.config.$field = $($wrap)?(value);
            self
        }
    };
    ($(#[$doc:meta])* option $name:ident: $ty:ty => $field:ident) => {
        $(#[$doc])*
        pub fn $name(mut self, value: $ty) -> Self {
            self.config.$field = value;
            self.options_set.push(stringify!($field));
            self
        }
    };
}

impl PrivacyEngine {
    /// The default settings (see [`PrivacyEngine`]).
    pub fn new() -> Self {
        Self { config: TrainConfig::default(), options_set: Vec::new() }
    }

    setting!(
        /// The mechanism: gaussian (DP-SGD/DP-Adam with the optimiser given), ls-sgd, optimized,
        /// optimized-paper, or none (the unperturbed baseline).
        mechanism: MechanismName => mechanism
    );
    setting!(
        /// Calibrates the noise multiplier so that the whole run spends this epsilon.
        target_epsilon: f64 => target_epsilon = Some
    );
    setting!(
        /// Uses this noise multiplier z (noise std z times the clip norm) instead of a target.
        noise_multiplier: f64 => noise_multiplier = Some
    );
    setting!(
        /// Delta of the (epsilon, delta) guarantee; keep it below 1/N.
        delta: f64 => delta
    );
    setting!(
        /// Clipping bound C of each example's gradient.
        clip_norm: f64 => clip_norm
    );
    setting!(
        /// Flat (the whole gradient) or per-layer clipping (default: the mechanism's).
        clipping: Clipping => clipping = Some
    );
    setting!(
        /// Expected examples per lot L (the sampling rate is q = L / N).
        lot_size: usize => lot_size
    );
    setting!(
        /// Examples per physical batch: bounds memory, does not change the result.
        batch_size: usize => batch_size
    );
    setting!(
        /// Passes over the data: the run plans round(epochs N / L) steps.
        epochs: f64 => epochs
    );
    setting!(
        /// Poisson lots (what the accountants certify) or shuffled lots (label none).
        sampling: LotSampling => sampling
    );
    setting!(
        /// The accountant of the reported epsilon.
        accountant: AccountantName => accountant
    );
    setting!(
        /// ls-sgd: the Laplacian smoothing parameter s.
        option ls_sigma: f64 => ls_sigma
    );
    setting!(
        /// ls-sgd: smooth each parameter tensor, or the whole model as one vector.
        option ls_scope: SmoothingScope => ls_scope
    );
    setting!(
        /// optimized-paper: recompute the full-data gradient every this many lots.
        option sensitivity_every: u64 => sensitivity_every
    );
    setting!(
        /// A reproducible run: lots and noise derive from the seed, so the guarantee holds only
        /// while the seed stays secret.
        seed: u64 => seed = Some
    );

    /// Wraps `optimizer` so that every step of `model` on lots of `source` is a DP step: checks
    /// the settings, plans the run on `source`'s N examples (calibrating the noise multiplier
    /// when a target epsilon is given, refusing a plan over budget), and dry-runs the model's
    /// per-example gradients on two examples.
    pub fn make_private<M: Module>(
        self,
        model: &M,
        optimizer: ModuleOptimizer,
        source: &dyn LotSource<M>,
        device: &Device,
    ) -> Result<DpOptimizer<M>> {
        let device = SelectedDevice::of(device);
        let config = self.config;
        let mechanism: Arc<dyn mechanism::Mechanism> = mechanism::for_config(&config)?.into();
        if let Some(key) = self.options_set.iter().find(|key| !mechanism.options().contains(key)) {
            let reason =
                format!("an option of another mechanism: the {:?} mechanism does not read it", mechanism.name());
            return Err(EngineError::invalid(key, reason));
        }
        config.validate(mechanism.as_ref())?;
        if source.is_empty() {
            return Err(EngineError::Data("the lot source holds no example".into()));
        }
        let plan = plan(&config, mechanism.as_ref(), source.len())?;
        let table = ParamTable::of(model)?;
        dry_run(model, source, Batching::for_backend(config.batch_size, device.backend), &table, &device.device)?;
        let sampler = fresh_sampler(&config, &plan, ChaChaState::new(config.seed, SAMPLER_STREAM))?;
        let state = StepState::fresh(sampler, ChaChaState::new(config.seed, NOISE_STREAM));
        let start = StartFrom { state, steps_taken: 0, canaries: None };
        DpOptimizer::assemble(config, mechanism, plan, &table, optimizer, start, &device)
    }
}

/// The loss and the per-example gradients of `model` on the first two examples of `source`,
/// so that a mistake in the model or the loss is a one-line error before the run starts; a
/// parameter that no layer recorded (it would have no per-example gradient) is refused by name.
pub fn dry_run<M: Module>(
    model: &M,
    source: &dyn LotSource<M>,
    batching: Batching,
    table: &ParamTable,
    device: &Device,
) -> Result<()> {
    let lot: Vec<usize> = (0..source.len().min(2)).collect();
    let inference = model.valid();
    without_panics(|| {
        let (out, tape) = recording(|| source.losses(&inference, &lot, device)).map_err(|e| table.name_shared(e))?;
        let dims = out.losses.dims();
        if dims != [lot.len()] {
            return Err(EngineError::invalid(
                "loss",
                format!(
                    "the lot source gave losses of shape {dims:?} for {} examples: one per example is needed",
                    lot.len()
                ),
            ));
        }
        table.check_recorded(tape.params())?;
        lot_sum(&inference, source, &lot, batching, table, None, device).map(|_| ())
    })
}

/// Runs `f`, turning a panic inside it (Burn's shape checks panic) into a one-line error, with
/// the panic message silenced.
fn without_panics(f: impl FnOnce() -> Result<()>) -> Result<()> {
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let outcome = panic::catch_unwind(AssertUnwindSafe(f));
    panic::set_hook(hook);
    outcome.unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("no message");
        let line = message.split_whitespace().collect::<Vec<_>>().join(" ");
        Err(EngineError::invalid("model", format!("its forward pass or loss failed on two examples: {line}")))
    })
}
