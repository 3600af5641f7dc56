//! What determines a run's privacy, and nothing else (JAX Privacy keeps performance flags apart
//! from privacy settings): the mechanism with its own typed options, the noise level (a noise
//! multiplier or a target epsilon, never both), delta, the clipping bound and where it applies,
//! the lot size and the run's length, how lots are sampled, the accountant and the seed. Built
//! Burn-style with `with_*` methods; an option of another mechanism cannot be written, because
//! each mechanism's options are fields of its own type.
//!
//! ```
//! use dp_engine::mechanism::laplacian_smoothing::LaplacianSmoothed;
//! use dp_engine::privacy_config::PrivacyConfig;
//!
//! let config = PrivacyConfig::new(LaplacianSmoothed::sgd(2.0)?)
//!     .with_target_epsilon(3.0)
//!     .with_delta(1e-5)
//!     .with_lot_size(256)
//!     .with_epochs(3.0);
//! config.validate()?;
//! assert_eq!(config.mechanism.name(), "ls-sgd");
//! # Ok::<(), dp_engine::EngineError>(())
//! ```

use crate::clipping::Clipping;
use crate::error::{EngineError, Result};
use crate::mechanism::Mechanism;
use crate::mechanism::gaussian::Gaussian;
use crate::privacy::AccountantName;
use dp_accounting::LotSampling;
use std::fmt;
use std::sync::Arc;

/// How much noise a run adds: given, or calibrated to the budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NoiseLevel {
    /// The noise multiplier z (noise std z C).
    Multiplier(f64),
    /// The smallest z that keeps the whole planned run within this epsilon.
    TargetEpsilon(f64),
}

/// What determines a run's privacy. Defaults: DP-SGD (`Gaussian`), Poisson lots of 256, one
/// epoch, delta 1e-5, clip norm 1, the mechanism's clipping, the RDP accountant, noise keyed
/// from the OS; the noise level must be given (except for the unperturbed baseline).
#[derive(Clone)]
pub struct PrivacyConfig {
    /// The mechanism, carrying its own options.
    pub mechanism: Arc<dyn Mechanism>,
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
    pub accountant: AccountantName,
    /// A reproducible run's seed (lots and noise derive from it); None keys from the OS.
    pub seed: Option<u64>,
}

impl fmt::Debug for PrivacyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrivacyConfig")
            .field("mechanism", &self.mechanism.name())
            .field("noise", &self.noise)
            .field("delta", &self.delta)
            .field("clip_norm", &self.clip_norm)
            .field("clipping", &self.clipping)
            .field("lot_size", &self.lot_size)
            .field("epochs", &self.epochs)
            .field("sampling", &self.sampling)
            .field("accountant", &self.accountant)
            .field("seeded", &self.seed.is_some())
            .finish()
    }
}

impl Default for PrivacyConfig {
    fn default() -> Self {
        Self::new(Gaussian)
    }
}

/// A Burn-style `with_*` method setting one field.
macro_rules! with {
    ($(#[$doc:meta])* $name:ident: $ty:ty => $field:ident $(= $wrap:path)?) => {
        $(#[$doc])*
        pub fn $name(mut self, value: $ty) -> Self {
            self.$field = $($wrap)?(value);
            self
        }
    };
}

/// `v` when it is finite and positive, else an error naming the setting.
pub fn positive(name: &'static str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 { Ok(()) } else { Err(EngineError::invalid(name, format!("{v} must be positive"))) }
}

impl PrivacyConfig {
    /// The default settings with `mechanism` (see [`PrivacyConfig`]).
    pub fn new(mechanism: impl Mechanism + 'static) -> Self {
        Self::with_shared(Arc::new(mechanism))
    }

    /// The default settings with a mechanism already shared (as the registry builds one).
    pub fn with_shared(mechanism: Arc<dyn Mechanism>) -> Self {
        Self {
            mechanism,
            noise: None,
            delta: 1e-5,
            clip_norm: 1.0,
            clipping: None,
            lot_size: 256,
            epochs: 1.0,
            sampling: LotSampling::Poisson,
            accountant: AccountantName::Rdp,
            seed: None,
        }
    }

    with!(
        /// Calibrates the noise multiplier so that the whole run spends this epsilon.
        with_target_epsilon: f64 => noise = target_epsilon
    );
    with!(
        /// Uses this noise multiplier z (noise std z C) instead of a target epsilon.
        with_noise_multiplier: f64 => noise = multiplier
    );
    with!(
        /// Delta of the (epsilon, delta) guarantee; keep it below 1/N.
        with_delta: f64 => delta
    );
    with!(
        /// Clipping bound C of each example's gradient.
        with_clip_norm: f64 => clip_norm
    );
    with!(
        /// Flat (the whole gradient) or per-layer clipping (default: the mechanism's).
        with_clipping: Clipping => clipping = Some
    );
    with!(
        /// Expected examples per lot L (the sampling rate is q = L / N).
        with_lot_size: usize => lot_size
    );
    with!(
        /// Passes over the data: the run plans round(epochs N / L) steps.
        with_epochs: f64 => epochs
    );
    with!(
        /// Poisson lots (what the accountants certify) or shuffled lots (label none).
        with_sampling: LotSampling => sampling
    );
    with!(
        /// The accountant of the reported epsilon.
        with_accountant: AccountantName => accountant
    );
    with!(
        /// A reproducible run: lots and noise derive from the seed, so the guarantee holds only
        /// while the seed stays secret.
        with_seed: u64 => seed = Some
    );

    /// The target epsilon, when the noise is calibrated to one.
    pub fn target_epsilon(&self) -> Option<f64> {
        match self.noise {
            Some(NoiseLevel::TargetEpsilon(e)) => Some(e),
            _ => None,
        }
    }

    /// The clipping used: the one given, or the mechanism's default.
    pub fn clipping(&self) -> Clipping {
        self.clipping.unwrap_or(self.mechanism.default_clipping())
    }

    /// Checks the values, and what the mechanism needs from them.
    pub fn validate(&self) -> Result<()> {
        positive("epochs", self.epochs)?;
        if self.lot_size == 0 {
            return Err(EngineError::invalid("lot size", "must be at least 1"));
        }
        self.mechanism.validate(self, self.clipping())?;
        if self.mechanism.is_private() {
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

/// `NoiseLevel::TargetEpsilon`, as a function for the `with!` macro.
fn target_epsilon(e: f64) -> Option<NoiseLevel> {
    Some(NoiseLevel::TargetEpsilon(e))
}

/// `NoiseLevel::Multiplier`, as a function for the `with!` macro.
fn multiplier(z: f64) -> Option<NoiseLevel> {
    Some(NoiseLevel::Multiplier(z))
}
