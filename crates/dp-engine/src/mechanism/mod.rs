//! The privacy mechanisms, one file each, behind one trait: what a mechanism checks in the run's
//! configuration, how it sets the noise multiplier, how it spreads the noise over the parameters,
//! what it does to the noisy gradient afterwards, and what privacy it reports with which label.
//! [`for_config`] is the registry, the one place that matches on the mechanism's name: adding a
//! mechanism is a file here and a line there. The math: docs/ARCHITECTURE.md, "Mechanisms".

mod gaussian;
mod laplacian_smoothing;
mod none;
mod optimized;
mod optimized_paper;

use crate::allocation::NoiseAllocation;
use crate::clipping::Clipping;
use crate::error::Result;
use crate::grad_sample::params::ParamTable;
use crate::privacy::{PrivacySpent, certified, given_or_calibrated};
use crate::train_config::{MechanismName, OptimizerName, TrainConfig};
use burn::tensor::Tensor;
use dp_accounting::PrivacyLedger;

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
    /// The name users type.
    fn name(&self) -> MechanismName;

    /// False for the unperturbed baseline, which neither clips nor adds noise.
    fn is_private(&self) -> bool {
        true
    }

    /// The clipping used when the run names none.
    fn default_clipping(&self) -> Clipping {
        Clipping::Flat
    }

    /// The update rule used when the run names none.
    fn default_optimizer(&self) -> OptimizerName {
        OptimizerName::Sgd
    }

    /// The configuration keys only this mechanism reads (refused with the others).
    fn options(&self) -> &'static [&'static str] {
        &[]
    }

    /// Checks what the mechanism needs from the run's configuration.
    fn validate(&self, _config: &TrainConfig, _clipping: Clipping) -> Result<()> {
        Ok(())
    }

    /// The noise multiplier of a run of `steps` steps at sampling rate `sample_rate` (None: no
    /// noise).
    fn noise_multiplier(&self, config: &TrainConfig, sample_rate: f64, steps: u64) -> Result<Option<f64>> {
        given_or_calibrated(config, sample_rate, steps).map(Some)
    }

    /// The noise multiplier every ledger entry of a run at `z` records: what a resumed
    /// checkpoint's ledger is checked against.
    fn ledger_multiplier(&self, z: f64) -> ExpectedMultiplier {
        ExpectedMultiplier { z, tolerance: 0.0 }
    }

    /// How the noise of a step at noise multiplier `z` is spread over the parameters of `table`
    /// (a checkpoint's state is restored into it with `NoiseAllocation::restore`).
    fn allocation(&self, z: f64, config: &TrainConfig, table: &ParamTable) -> NoiseAllocation {
        let _ = table;
        NoiseAllocation::Uniform { noise_multiplier: z, clip_norm: config.clip_norm }
    }

    /// Post-processing of the released (noisy, averaged) gradient, one tensor per parameter of
    /// `table`: free of privacy cost.
    fn post_process(&self, grads: Vec<Tensor<1>>, _table: &ParamTable) -> Result<Vec<Tensor<1>>> {
        Ok(grads)
    }

    /// The privacy of `ledger` after its steps of `planned`.
    fn privacy(&self, config: &TrainConfig, ledger: &PrivacyLedger, _planned: u64) -> Result<PrivacySpent> {
        certified(config, ledger)
    }

    /// A second readout beside the reported epsilon, where the mechanism has one.
    fn second_readout(&self, _config: &TrainConfig, _ledger: &PrivacyLedger) -> Result<Option<PrivacySpent>> {
        Ok(None)
    }

    /// Caveats printed with every run of this mechanism.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The mechanism a run's configuration names, with its own parameters read from it.
pub fn for_config(config: &TrainConfig) -> Result<Box<dyn Mechanism>> {
    Ok(match config.mechanism {
        MechanismName::None => Box::new(none::Unperturbed),
        MechanismName::Gaussian => Box::new(gaussian::Gaussian),
        MechanismName::LsSgd => Box::new(laplacian_smoothing::LaplacianSmoothed::new(config, OptimizerName::Sgd)?),
        MechanismName::LsAdam => Box::new(laplacian_smoothing::LaplacianSmoothed::new(config, OptimizerName::Adam)?),
        MechanismName::Optimized => Box::new(optimized::Optimized),
        MechanismName::OptimizedPaper => Box::new(optimized_paper::OptimizedPaper { every: config.sensitivity_every }),
    })
}
