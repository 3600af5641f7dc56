//! What determines a run's privacy, and nothing else (JAX Privacy keeps performance flags apart
//! from privacy settings): the mechanism with its own typed options, and the
//! [`PrivacySettings`] it reads (noise level, delta, clipping, lot size, run length, sampling,
//! accountant, seed), and which parameters it keeps frozen (they are released by no step). Built
//! Burn-style with `with_*` methods; an option of another mechanism
//! cannot be written, because each mechanism's options are fields of its own type.
//!
//! ```
//! use dp_engine::privacy::mechanism::laplacian_smoothing::LaplacianSmoothed;
//! use dp_engine::privacy::PrivacyConfig;
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
use crate::error::Result;
use crate::grad_sample::params::ParamTable;
use crate::privacy::mechanism::Mechanism;
use crate::privacy::mechanism::gaussian::Gaussian;
use crate::privacy::settings::{AccountantChoice, AccountantName};
use crate::privacy::settings::{NoiseLevel, PrivacySettings};
use burn::module::Module;
use dp_accounting::{Accountant, LotSampling};
use std::fmt;
use std::sync::Arc;

/// What determines a run's privacy: the mechanism and the settings it reads (see
/// [`PrivacySettings`] for the defaults; the noise level must be given, except for the
/// unperturbed baseline).
#[derive(Clone)]
pub struct PrivacyConfig {
    /// The mechanism, carrying its own options.
    pub mechanism: Arc<dyn Mechanism>,
    /// Noise level, delta, clipping, lot size, length, sampling, accountant, seed.
    pub settings: PrivacySettings,
    /// Regular expressions of the parameter paths kept fixed ([`ParamTable::freezing`]): no
    /// gradient, no noise, no update; empty: every parameter is trained.
    pub frozen: Vec<String>,
}

impl fmt::Debug for PrivacyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seeded = self.settings.seed.is_some();
        let settings = PrivacySettings { seed: None, ..self.settings.clone() };
        f.debug_struct("PrivacyConfig")
            .field("mechanism", &self.mechanism.name())
            .field("settings", &settings)
            .field("seeded", &seeded)
            .field("frozen", &self.frozen)
            .finish()
    }
}

impl Default for PrivacyConfig {
    fn default() -> Self {
        Self::new(Gaussian)
    }
}

/// A Burn-style `with_*` method setting one of the settings.
macro_rules! with {
    ($(#[$doc:meta])* $name:ident: $ty:ty => $field:ident $(= $wrap:path)?) => {
        $(#[$doc])*
        pub fn $name(mut self, value: $ty) -> Self {
            self.settings.$field = $($wrap)?(value);
            self
        }
    };
}

impl PrivacyConfig {
    /// The default settings with `mechanism` (see [`PrivacyConfig`]).
    pub fn new(mechanism: impl Mechanism + 'static) -> Self {
        Self::with_shared(Arc::new(mechanism))
    }

    /// The default settings with a mechanism already shared (as the registry builds one).
    pub fn with_shared(mechanism: Arc<dyn Mechanism>) -> Self {
        Self { mechanism, settings: PrivacySettings::default(), frozen: Vec::new() }
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
        /// The accountant of the reported epsilon, by name (rdp by default).
        with_accountant: AccountantName => accountant = AccountantChoice::Named
    );
    with!(
        /// A user's own accountant (any `dp_accounting::Accountant`): the run's epsilon is its
        /// epsilon, certified only for the releases its `supports` accepts, and a target epsilon
        /// is calibrated against it.
        with_own_accountant: Arc<dyn Accountant> => accountant = AccountantChoice::Own
    );
    with!(
        /// A reproducible run: lots and noise derive from the seed, so the guarantee holds only
        /// while the seed stays secret.
        with_seed: u64 => seed = Some
    );

    /// Keeps the parameters whose path (as `ParamTable` and a weight file name them, e.g.
    /// `convs.0.weight`) one of these regular expressions matches fixed: fine-tuning a
    /// pretrained model's last layers. Privacy is unchanged (each step still releases the
    /// trained parameters' clipped sum with its noise); the frozen ones are released by none.
    pub fn with_frozen(mut self, patterns: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.frozen = patterns.into_iter().map(Into::into).collect();
        self
    }

    /// The parameters of `model` a run of this configuration trains (the frozen ones apart).
    pub fn table<M: Module>(&self, model: &M) -> Result<ParamTable> {
        ParamTable::of(model)?.freezing(&self.frozen)
    }

    /// The clipping used: the one given, or the mechanism's default.
    pub fn clipping(&self) -> Clipping {
        self.settings.clipping.unwrap_or(self.mechanism.default_clipping())
    }

    /// Checks the settings, and what the mechanism needs from them.
    pub fn validate(&self) -> Result<()> {
        self.settings.validate(self.mechanism.is_private())?;
        self.mechanism.validate(&self.settings, self.clipping())
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
