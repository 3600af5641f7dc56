//! The privacy mechanisms, one file each, behind one trait: what a mechanism checks in the run's
//! privacy configuration, how it sets the noise multiplier, how it spreads the noise over the
//! parameters (a [`NoiseAllocation`] with its state), what it does to the noisy gradient
//! afterwards, and what privacy it reports with which label. A mechanism's options are fields of
//! its own type. The trait is open: a library user's mechanism is a type implementing it, given
//! to [`crate::privacy::config::PrivacyConfig::new`], and reads the run's
//! [`PrivacySettings`]; a built-in one is also a line of
//! [`registry::BUILTIN`], which builds it by name from a configuration file's keys. The math:
//! docs/MECHANISMS.md, "Mechanisms and what a run may claim".

pub mod allocation;
pub mod gaussian;
pub mod laplacian_smoothing;
pub mod optimized;
pub mod optimized_paper;
pub mod registered;
pub mod registry;
pub mod smoothing;
pub mod unperturbed;

pub use registered::{MechanismName, MechanismOptions};
pub use registry::named;

use crate::clipping::Clipping;
use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use crate::optim::rules::UpdateRule;
use crate::privacy::accounting::{accounted, given_or_calibrated};
use crate::privacy::mechanism::allocation::{NoiseAllocation, Uniform};
use crate::privacy::settings::PrivacySettings;
use burn::tensor::Tensor;
use dp_accounting::{DpEvent, LotSampling, PrivacyLedger, PrivacyReport};

/// The noise multiplier a mechanism's ledger entries record, within a relative tolerance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpectedMultiplier {
    /// The multiplier.
    pub z: f64,
    /// How far (relative) an entry may be from it.
    pub tolerance: f64,
}

impl ExpectedMultiplier {
    /// True when a ledger entry's `z` is this one.
    pub fn admits(&self, z: f64) -> bool {
        (z - self.z).abs() <= self.tolerance * self.z
    }
}

/// A way of privatising the summed gradient of a lot.
pub trait Mechanism: Send + Sync {
    /// The name users type and reports print.
    fn name(&self) -> &'static str;

    /// False for the unperturbed baseline, which neither clips nor adds noise.
    fn is_private(&self) -> bool {
        true
    }

    /// The clipping used when the run names none.
    fn default_clipping(&self) -> Clipping {
        Clipping::Flat
    }

    /// Refuses an optimiser of a family the mechanism is not defined with (ls-adam is DP-LSAdam:
    /// not SGD); `make_private` and `resume` ask it of the optimiser given them.
    fn accepts_update(&self, _rule: UpdateRule) -> Result<()> {
        Ok(())
    }

    /// Checks what the mechanism needs from the run's privacy settings, under `clipping`.
    fn validate(&self, _config: &PrivacySettings, _clipping: Clipping) -> Result<()> {
        Ok(())
    }

    /// The noise multiplier of a run of `steps` steps at sampling rate `sample_rate` (None: no
    /// noise).
    fn noise_multiplier(&self, config: &PrivacySettings, sample_rate: f64, steps: u64) -> Result<Option<f64>> {
        given_or_calibrated(config, sample_rate, steps).map(Some)
    }

    /// The noise multiplier every ledger entry of a run at `z` records: what a resumed
    /// checkpoint's ledger is checked against.
    fn ledger_multiplier(&self, z: f64) -> ExpectedMultiplier {
        ExpectedMultiplier { z, tolerance: 0.0 }
    }

    /// How the noise of a step at noise multiplier `z` is spread over the parameters of `table`
    /// (a checkpoint's state is restored into it with `NoiseAllocation::restore`): sigma = z C
    /// everywhere unless the mechanism says otherwise.
    fn allocation(&self, z: f64, config: &PrivacySettings, _table: &ParamTable) -> Box<dyn NoiseAllocation> {
        Box::new(Uniform { noise_multiplier: z, clip_norm: config.clip_norm })
    }

    /// Post-processing of the released (noisy, averaged) gradient, one tensor per parameter of
    /// `table`: free of privacy cost.
    fn post_process(&self, grads: Vec<Tensor<1>>, _table: &ParamTable) -> Result<Vec<Tensor<1>>> {
        Ok(grads)
    }

    /// What one step at noise multiplier `z` (None: no noise) releases about a lot drawn by
    /// `sampling` at rate `sample_rate`: the event the ledger records for it.
    fn step_event(&self, z: Option<f64>, sample_rate: f64, sampling: LotSampling) -> Result<DpEvent> {
        let z =
            z.ok_or_else(|| EngineError::privacy(format!("{} adds noise, but no multiplier was set", self.name())))?;
        Ok(DpEvent::sampled_gaussian(z, sample_rate, sampling)?)
    }

    /// The privacy of `ledger` after its steps of `planned`.
    fn privacy(&self, config: &PrivacySettings, ledger: &PrivacyLedger, _planned: u64) -> Result<PrivacyReport> {
        accounted(config, ledger)
    }

    /// Caveats printed with every run of this mechanism.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}
