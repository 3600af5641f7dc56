//! The library entry point, as Opacus's `PrivacyEngine.make_private`: a Burn user's model (an
//! ordinary module built from `crate::nn`'s DP layers), their burn-optim optimiser, their data
//! and loss (a [`LotSource`]) and a [`PrivacyConfig`] become a [`DpOptimizer`] whose steps are
//! calibrated, Poisson-sampled and ledger-recorded, and which reports the epsilon spent with its
//! guarantee label. Before anything is calibrated for, a dry run on two examples turns the usual
//! mistakes (a loss that is not one per example, a layer without per-example gradients, weight
//! sharing, a shape mismatch in the forward pass, a layer of the user's own whose per-example rule
//! disagrees with Burn's autodiff) into one-line errors.
//!
//! ```no_run
//! # use dp_engine::engine::PrivacyEngine;
//! # use dp_engine::privacy::PrivacyConfig;
//! # use dp_engine::privacy::mechanism::gaussian::Gaussian;
//! # fn demo<M: burn::module::Module>(model: M, source: &dyn dp_engine::lots::LotSource<M>) -> dp_engine::Result<()> {
//! let device = burn::tensor::Device::flex(); // any Burn device: flex, wgpu, ndarray
//! let optimizer = burn::optim::SgdConfig::new().init();
//! let privacy = PrivacyConfig::new(Gaussian).with_target_epsilon(3.0).with_lot_size(256).with_epochs(3.0);
//! let mut dp = PrivacyEngine::new(privacy).make_private(&model, optimizer, source, &device)?;
//! let mut model = model;
//! while !dp.is_done() {
//!     model = dp.step(model, source, 0.5)?.0;
//! }
//! println!("{}", dp.privacy()?); // epsilon 2.99.. (delta 1e-5, rdp, certified)
//! # Ok(()) }
//! ```

use crate::backend::SelectedDevice;
use crate::checkpoint::format::DpCheckpoint;
use crate::checkpoint::keys::StreamKeys;
use crate::checkpoint::restore::{restore, same_data};
use crate::engine::optimizer::{DpOptimizer, StartFrom};
use crate::error::{EngineError, Result, one_line};
use crate::grad_sample::params::ParamTable;
use crate::grad_sample::tape::recording;
use crate::lots::batching::Batching;
use crate::lots::source::{LotSource, lot_sum};
use crate::privacy::config::PrivacyConfig;
use crate::privacy::plan::{Plan, fresh_sampler, plan};
use crate::step::StepState;
use crate::step::independence::independence;
use crate::step::layer_rules::check_layer_rules;
use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::tensor::Device;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A run's privacy configuration and how its lots are computed (physical batches bound memory
/// and change no result), applied to a model by [`PrivacyEngine::make_private`].
pub struct PrivacyEngine {
    privacy: PrivacyConfig,
    batch_size: usize,
    keys: Option<StreamKeys>,
}

impl std::fmt::Debug for PrivacyEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivacyEngine")
            .field("privacy", &self.privacy)
            .field("batch_size", &self.batch_size)
            .field("keys given", &self.keys.is_some())
            .finish()
    }
}

impl PrivacyEngine {
    /// The engine of `privacy`, in physical batches of 256 examples.
    pub fn new(privacy: PrivacyConfig) -> Self {
        Self { privacy, batch_size: 256, keys: None }
    }

    /// The keys of the run's lot sampler and noise streams (by default derived from the seed of
    /// a seeded run, or drawn from the OS): given to continue a run ([`Self::resume`]) or to keep
    /// them where the caller stores secrets. A seeded run takes only its seed's keys.
    pub fn with_keys(mut self, keys: StreamKeys) -> Self {
        self.keys = Some(keys);
        self
    }

    /// Examples per physical batch: bounds memory, does not change the result.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

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
        let (config, plan, device) = self.planned(source, device)?;
        let table = config.table(model)?;
        let scaled = dry_run(model, source, Batching::for_device(self.batch_size, &device), &table, &device.device)?;
        let keys = match self.keys {
            Some(keys) => keys,
            None => StreamKeys::for_run(config.settings.seed),
        };
        let sampler = fresh_sampler(&config, &plan, keys.sampler_stream())?;
        let state = StepState::fresh(sampler, keys.noise_stream());
        let start = StartFrom { keys, state, steps_taken: 0, average: None, data: source.fingerprint() };
        let mut dp = DpOptimizer::assemble(config, plan, &table, optimizer, start, self.batch_size, &device)?;
        dp.add_notes(scaled);
        Ok(dp)
    }

    /// Continues the run that wrote `checkpoint` (with [`DpOptimizer::checkpoint`]) on the same
    /// configuration and `source`, with the run's keys ([`DpOptimizer::keys`], given with
    /// [`Self::with_keys`]; a seeded run's derive from its seed): `model` and `optimizer` are
    /// fresh ones of the run's kind, into which the checkpoint's records are loaded. Everything
    /// the privacy claim depends on is checked first (the step counts, every ledger entry
    /// against the plan, the sampler replayed from its key, the noise stream's position, the
    /// allocation's state). The model comes back with the optimiser.
    pub fn resume<M: Module>(
        self,
        (model, optimizer): (M, ModuleOptimizer),
        source: &dyn LotSource<M>,
        device: &Device,
        checkpoint: DpCheckpoint,
    ) -> Result<(M, DpOptimizer<M>)> {
        let (config, plan, device) = self.planned(source, device)?;
        let keys = match (self.keys, config.settings.seed) {
            (Some(keys), _) => keys,
            (None, Some(seed)) => StreamKeys::for_run(Some(seed)),
            (None, None) => {
                return Err(EngineError::resume(
                    "give the run's keys: with_keys(StreamKeys::load(its key file)), as DpOptimizer::keys gave them; or, for a seeded run, the same seed in its PrivacyConfig",
                ));
            }
        };
        let data = same_data(checkpoint.header.data.clone(), source.fingerprint())?;
        let restored = restore(checkpoint, (model, optimizer), &config, &plan, &keys, &device.device)?;
        let table = config.table(&restored.model)?;
        let (steps_taken, average) = (restored.step, restored.average);
        let start = StartFrom { keys, state: restored.state, steps_taken, average, data };
        let dp = DpOptimizer::assemble(config, plan, &table, restored.optimizer, start, self.batch_size, &device)?;
        Ok((restored.model, dp))
    }

    /// The checked configuration and its plan on `source`'s examples, and the device; keys
    /// given to a seeded run must be its seed's.
    fn planned<M>(&self, source: &dyn LotSource<M>, device: &Device) -> Result<(PrivacyConfig, Plan, SelectedDevice)> {
        // Every step reallocates the tensors the last one freed: kept, not faulted in again
        // (from the dry run on).
        crate::host::keep_freed_memory();
        self.privacy.validate()?;
        if let (Some(seed), Some(keys)) = (self.privacy.settings.seed, &self.keys)
            && *keys != StreamKeys::for_run(Some(seed))
        {
            return Err(EngineError::invalid("keys", "the keys given are not those of the run's seed"));
        }
        if self.batch_size == 0 {
            return Err(EngineError::invalid("batch size", "must be at least 1"));
        }
        if source.is_empty() {
            return Err(EngineError::data("the lot source holds no example"));
        }
        let selected = SelectedDevice::of(device);
        if selected.backend == "ndarray" && !cfg!(feature = "ndarray") {
            return Err(EngineError::invalid(
                "device",
                "this dp-engine was built without Burn's ndarray backend: turn on its `ndarray` feature, or use Burn's flex",
            ));
        }
        let plan = plan(&self.privacy, source.len())?;
        Ok((self.privacy.clone(), plan, selected))
    }
}

/// The loss and the per-example gradients of `model` on the first examples of `source`, so that
/// a mistake in the model or the loss is a one-line error before the run starts: a parameter
/// that no layer recorded (it would have no per-example gradient) is refused by name, and so is
/// a loss that mixes the examples of a batch ([`independence`]). Gives the note of a loss
/// divided by the batch's size, if so. Then every layer's per-example rule (a user's own layer's
/// `PerExampleGrads` above all) is checked against Burn's autodiff (`check_layer_rules`).
fn dry_run<M: Module>(
    model: &M,
    source: &dyn LotSource<M>,
    batching: Batching,
    table: &ParamTable,
    device: &Device,
) -> Result<Option<String>> {
    let lot: Vec<usize> = (0..source.len().min(2)).collect();
    let inference = model.valid();
    without_panics(|| {
        let (out, tape) = recording(&table.frozen_ids(), || source.losses(&inference, &lot, device))
            .map_err(|e| table.name_shared(e))?;
        let out = out?;
        let dims = out.losses.dims();
        let views = source.views();
        if dims != [lot.len() * views] {
            return Err(EngineError::invalid(
                "loss",
                format!(
                    "the lot source gave losses of shape {dims:?} for {} examples: one per example and view is needed ({views} views each); dp_engine::lots::cross_entropy gives a classifier's",
                    lot.len()
                ),
            ));
        }
        table.check_recorded(tape.params())?;
        lot_sum(&inference, source, &lot, batching, table, None, device)?;
        let note = independence(&inference, source, &table.frozen_ids(), device)?;
        check_layer_rules(&inference, source, table)?;
        Ok(note)
    })
}
/// Dry runs in progress, in any thread: while one is, the panic hook prints nothing (a model's
/// mistake panics inside Burn's shape checks on purpose there).
static SILENCED: AtomicUsize = AtomicUsize::new(0);

/// Installs, once, the panic hook that defers to the one before it unless a dry run is in
/// progress: the hook is never swapped back and forth, which raced between threads (one thread
/// could restore the silent hook over another's and silence every later panic).
fn install_quiet_hook() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if SILENCED.load(Ordering::SeqCst) == 0 {
                previous(info);
            }
        }));
    });
}

/// Runs `f`, turning a panic inside it (Burn's shape checks panic) into a one-line error, with
/// the panic message silenced.
fn without_panics<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    install_quiet_hook();
    SILENCED.fetch_add(1, Ordering::SeqCst);
    let outcome = panic::catch_unwind(AssertUnwindSafe(f));
    SILENCED.fetch_sub(1, Ordering::SeqCst);
    outcome.unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("no message");
        let line = one_line(message);
        Err(EngineError::invalid("model", format!("its forward pass or loss failed on two examples: {line}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_panic_hook_is_never_left_silent_by_threads_refusing_at_once() {
        // A user's hook, chained to whatever was there; then many dry-run refusals at once.
        static SEEN: AtomicUsize = AtomicUsize::new(0);
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            SEEN.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..2000 {
                        let refused = without_panics::<()>(|| panic!("a shape check"));
                        assert!(refused.is_err_and(|e| e.to_string().contains("a shape check")));
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().expect("no thread panicked"));
        let before = SEEN.load(Ordering::SeqCst);
        assert!(panic::catch_unwind(|| panic!("a panic after the refusals")).is_err());
        assert!(SEEN.load(Ordering::SeqCst) > before, "the user's hook still sees a panic");
    }
}
