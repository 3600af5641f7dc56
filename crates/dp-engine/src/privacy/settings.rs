//! The numbers that decide a run's privacy, apart from the mechanism: the noise level (a noise
//! multiplier or a target epsilon, never both), delta, the clipping bound and where it applies,
//! the lot size and the run's length, how lots are sampled, the accountant and the seed. A
//! mechanism reads them ([`crate::privacy::mechanism::Mechanism`]); a [`crate::privacy::config::PrivacyConfig`]
//! holds them with the mechanism.

use crate::clipping::Clipping;
use crate::error::{EngineError, Result};
pub use dp_accounting::AccountantName;
use dp_accounting::search::TrainingShape;
use dp_accounting::{Accountant, LotSampling};
use std::sync::Arc;

/// The accountant of a run: a built-in one by name, or a user's own, any
/// `dp_accounting::Accountant` (as Google's dp_accounting takes any `PrivacyAccountant`): its
/// `supports` decides which releases its epsilon certifies, its `epsilon` what the run reports
/// and what a target epsilon calibrates against.
#[derive(Clone)]
pub enum AccountantChoice {
    /// One of the engine's sound accountants.
    Named(AccountantName),
    /// A user's own.
    Own(Arc<dyn Accountant>),
}

impl std::fmt::Debug for AccountantChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccountantChoice::Named(name) => write!(f, "Named({name:?})"),
            AccountantChoice::Own(accountant) => write!(f, "Own({:?})", accountant.name()),
        }
    }
}

impl PartialEq for AccountantChoice {
    /// The same name, or the same accountant object.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (AccountantChoice::Named(a), AccountantChoice::Named(b)) => a == b,
            (AccountantChoice::Own(a), AccountantChoice::Own(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl From<AccountantName> for AccountantChoice {
    fn from(name: AccountantName) -> Self {
        AccountantChoice::Named(name)
    }
}

/// How much noise a run adds: given, or calibrated to the budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NoiseLevel {
    /// The noise multiplier z (noise std z C).
    Multiplier(f64),
    /// The smallest z that keeps the whole planned run within this epsilon.
    TargetEpsilon(f64),
}

/// The privacy settings of a run. Defaults: Poisson lots of 256, one epoch, delta 1e-5, clip norm
/// 1, the mechanism's clipping, the RDP accountant, noise keyed from the OS; no noise level.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivacySettings {
    /// Noise multiplier or target epsilon (None: not given).
    pub noise: Option<NoiseLevel>,
    /// Delta of the (epsilon, delta) guarantee.
    pub delta: f64,
    /// Clipping bound C of each example's gradient.
    pub clip_norm: f64,
    /// Flat or per-layer clipping (None: the mechanism's default).
    pub clipping: Option<Clipping>,
    /// Expected examples per lot L (the sampling rate is q = L / N).
    pub lot_size: usize,
    /// Passes over the data: the run plans round(epochs N / L) steps.
    pub epochs: f64,
    /// Poisson lots (what the accountants certify) or shuffled lots (label none).
    pub sampling: LotSampling,
    /// The accountant of the reported epsilon.
    pub accountant: AccountantChoice,
    /// A reproducible run's seed (lots and noise derive from it); None keys from the OS.
    pub seed: Option<u64>,
}

impl Default for PrivacySettings {
    fn default() -> Self {
        Self {
            noise: None,
            delta: 1e-5,
            clip_norm: 1.0,
            clipping: None,
            lot_size: 256,
            epochs: 1.0,
            sampling: LotSampling::Poisson,
            accountant: AccountantChoice::Named(AccountantName::Rdp),
            seed: None,
        }
    }
}

/// `v` when it is finite and positive, else an error naming the setting.
pub fn positive(name: &'static str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 { Ok(()) } else { Err(EngineError::invalid(name, format!("{v} must be positive"))) }
}

impl PrivacySettings {
    /// The target epsilon, when the noise is calibrated to one.
    pub fn target_epsilon(&self) -> Option<f64> {
        match self.noise {
            Some(NoiseLevel::TargetEpsilon(e)) => Some(e),
            _ => None,
        }
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

    /// The training a run of these settings is on `n` examples: its sampling rate q = L / N and
    /// its planned steps; refused when a lot would be empty or larger than the training set.
    pub fn training_shape(&self, n: usize) -> Result<TrainingShape> {
        if self.lot_size == 0 {
            return Err(EngineError::invalid("lot size", "must be at least 1"));
        }
        if self.lot_size > n {
            return Err(EngineError::invalid(
                "lot size",
                format!("{} exceeds the {n} training examples", self.lot_size),
            ));
        }
        Ok(TrainingShape { sample_rate: self.lot_size as f64 / n as f64, steps: self.planned_steps(n)? })
    }

    /// Checks the values a run of a mechanism that is (`private`) or is not private needs.
    pub fn validate(&self, private: bool) -> Result<()> {
        positive("epochs", self.epochs)?;
        if self.lot_size == 0 {
            return Err(EngineError::invalid("lot size", "must be at least 1"));
        }
        if private {
            positive("clip norm", self.clip_norm)?;
            if !(self.delta > 0.0 && self.delta < 1.0) {
                return Err(EngineError::invalid("delta", format!("{} is not in (0, 1)", self.delta)));
            }
            match self.noise {
                None => {
                    return Err(EngineError::invalid(
                        "privacy",
                        "this mechanism needs a noise level: with_noise_multiplier or with_target_epsilon (or the mechanism none)",
                    ));
                }
                Some(NoiseLevel::Multiplier(z)) => positive("noise multiplier", z)?,
                Some(NoiseLevel::TargetEpsilon(e)) => positive("target epsilon", e)?,
            }
        }
        Ok(())
    }
}
