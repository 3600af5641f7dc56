//! Everything that defines a training run. Every field is a `dptrain train` flag and a key of its
//! TOML config; the resolved config is written to the run folder.

use crate::activation::Activation;
use crate::backend::DeviceChoice;
use crate::clipping::Clipping;
use crate::error::{EngineError, Result};
use crate::mechanism::Mechanism;
use crate::smoothing::SmoothingScope;
use crate::zoo::{ModelName, Normalization};
use dp_accounting::LotSampling;
use dp_data::DatasetName;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How the lot's gradient is privatised: the names of `crate::mechanism`'s implementations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MechanismName {
    /// No clipping, no noise: the unperturbed baseline (no privacy).
    None,
    /// DP-SGD / DP-Adam: per-example clipping and Gaussian noise.
    Gaussian,
    /// DP-LSSGD (Wang et al.): DP-SGD whose noisy gradient is Laplacian-smoothed (post-processing).
    LsSgd,
    /// DP-LSAdam: the smoothed gradient fed to Adam.
    LsAdam,
    /// The optimized additive noise mechanism, sound (docs/ARCHITECTURE.md, "The optimized additive
    /// noise mechanism"): per-layer clipping and a
    /// sigma per layer from Xiang et al.'s solver at the calibrated noise multiplier.
    Optimized,
    /// Xiang et al.'s Algorithm 1 as written: Eq. 12 budget, corrected tau, per-coordinate sigma from
    /// the solver with w the full-data gradient (label paper-bound; its sigma's own epsilon: none).
    OptimizedPaper,
}

/// Update rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OptimizerName {
    /// SGD with (heavy-ball) momentum.
    Sgd,
    /// Adam (Kingma & Ba), weight decay added to the gradient.
    Adam,
    /// AdamW (Loshchilov & Hutter): decoupled weight decay.
    Adamw,
}

/// Sound accountant used for the run's epsilon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccountantName {
    /// Rényi DP (what Opacus and TF Privacy report).
    Rdp,
    /// Privacy random variables: a tight upper bound.
    Prv,
}

/// A training run's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    /// Dataset.
    pub dataset: DatasetName,
    /// Folder holding the dataset's files (default: the dataset's standard location).
    pub data_dir: Option<PathBuf>,
    /// Architecture.
    pub model: ModelName,
    /// Non-linearity.
    pub activation: Activation,
    /// Hidden width of `mlp`.
    pub hidden: Option<usize>,
    /// Normalisation layers (BatchNorm is refused).
    pub normalization: Normalization,
    /// Device.
    pub device: DeviceChoice,
    /// Privacy mechanism.
    pub mechanism: MechanismName,
    /// Passes over the data (steps = round(epochs * N / lot_size)).
    pub epochs: f64,
    /// Expected examples per lot L (the sampling rate is q = L / N).
    pub lot_size: usize,
    /// Examples per physical batch (bounds memory; does not change the result).
    pub batch_size: usize,
    /// Lot sampling.
    pub sampling: LotSampling,
    /// Noise multiplier z (noise std = z * clip_norm); exclusive with target_epsilon.
    pub noise_multiplier: Option<f64>,
    /// Calibrate z so that the whole run spends this epsilon.
    pub target_epsilon: Option<f64>,
    /// Delta of the reported (epsilon, delta).
    pub delta: f64,
    /// Clipping bound C.
    pub clip_norm: f64,
    /// Flat or per-layer clipping (default: per-layer for optimized, else flat).
    pub clipping: Option<Clipping>,
    /// optimized-paper: recompute the full-data gradient w every this many lots.
    pub sensitivity_every: u64,
    /// Laplacian smoothing parameter s of ls-sgd / ls-adam (s = 0 is plain DP-SGD).
    pub ls_sigma: f64,
    /// What ls-sgd / ls-adam smooth: each parameter tensor, or the whole model as one vector.
    pub ls_scope: SmoothingScope,
    /// Update rule (default: adam for ls-adam, else sgd).
    pub optimizer: Option<OptimizerName>,
    /// Learning rate.
    pub learning_rate: f64,
    /// SGD momentum (PyTorch's convention: no dampening).
    pub momentum: f64,
    /// Weight decay (L2 for SGD and Adam, decoupled for AdamW).
    pub weight_decay: f64,
    /// Accountant.
    pub accountant: AccountantName,
    /// Seed for a reproducible run (sampling, noise and initialisation); None keys from the OS.
    pub seed: Option<u64>,
    /// Write a checkpoint every this many steps (0: only at the end).
    pub checkpoint_every: u64,
    /// Run folder.
    pub out_dir: PathBuf,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            dataset: DatasetName::FashionMnist,
            data_dir: None,
            model: ModelName::MnistCnn,
            activation: Activation::Tanh,
            hidden: None,
            normalization: Normalization::None,
            device: DeviceChoice::Auto,
            mechanism: MechanismName::Gaussian,
            epochs: 1.0,
            lot_size: 256,
            batch_size: 256,
            sampling: LotSampling::Poisson,
            noise_multiplier: None,
            target_epsilon: None,
            delta: 1e-5,
            clip_norm: 1.0,
            clipping: None,
            sensitivity_every: 1,
            ls_sigma: 1.0,
            ls_scope: SmoothingScope::Tensor,
            optimizer: None,
            learning_rate: 0.5,
            momentum: 0.0,
            weight_decay: 0.0,
            accountant: AccountantName::Rdp,
            seed: None,
            checkpoint_every: 200,
            out_dir: PathBuf::from("runs/latest"),
        }
    }
}

fn positive(name: &'static str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 { Ok(()) } else { Err(EngineError::invalid(name, format!("{v} must be positive"))) }
}

impl TrainConfig {
    /// Checks the values that do not depend on the data, and what `mechanism` (the one this
    /// configuration names) needs.
    pub fn validate(&self, mechanism: &dyn Mechanism) -> Result<()> {
        positive("epochs", self.epochs)?;
        positive("learning rate", self.learning_rate)?;
        if self.lot_size == 0 {
            return Err(EngineError::invalid("lot size", "must be at least 1"));
        }
        if self.batch_size == 0 {
            return Err(EngineError::invalid("batch size", "must be at least 1"));
        }
        if self.out_dir.as_os_str().is_empty() {
            return Err(EngineError::invalid("out dir", "is empty: name the run's folder"));
        }
        if !(0.0..1.0).contains(&self.momentum) {
            return Err(EngineError::invalid("momentum", format!("{} is not in [0, 1)", self.momentum)));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(EngineError::invalid(
                "weight decay",
                format!("{} is not a non-negative number", self.weight_decay),
            ));
        }
        mechanism.validate(self, self.clipping(mechanism))?;
        if mechanism.is_private() {
            positive("clip norm", self.clip_norm)?;
            if !(self.delta > 0.0 && self.delta < 1.0) {
                return Err(EngineError::invalid("delta", format!("{} is not in (0, 1)", self.delta)));
            }
            match (self.noise_multiplier, self.target_epsilon) {
                (Some(_), Some(_)) => {
                    return Err(EngineError::invalid(
                        "privacy",
                        "give either --noise-multiplier or --target-epsilon, not both",
                    ));
                }
                (None, None) => {
                    return Err(EngineError::invalid(
                        "privacy",
                        "this mechanism needs --noise-multiplier or --target-epsilon (or --mechanism none)",
                    ));
                }
                (Some(z), None) => positive("noise multiplier", z)?,
                (None, Some(e)) => positive("target epsilon", e)?,
            }
        }
        Ok(())
    }

    /// The clipping used: the one given, or the mechanism's default.
    pub fn clipping(&self, mechanism: &dyn Mechanism) -> Clipping {
        self.clipping.unwrap_or(mechanism.default_clipping())
    }

    /// The update rule used: the one given, or the mechanism's default.
    pub fn optimizer(&self, mechanism: &dyn Mechanism) -> OptimizerName {
        self.optimizer.unwrap_or(mechanism.default_optimizer())
    }

    /// Planned steps for a training set of `n` examples.
    pub fn planned_steps(&self, n: usize) -> Result<u64> {
        let steps = (self.epochs * n as f64 / self.lot_size as f64).round();
        if steps < 1.0 {
            return Err(EngineError::invalid(
                "epochs",
                format!("{} epochs of lots of {} is no step", self.epochs, self.lot_size),
            ));
        }
        Ok(steps as u64)
    }
}
