//! What a run may spend and what it spent: the settings ([`PrivacySettings`]: the noise or the
//! target, delta, clipping, the training shape, the accountant), the mechanisms that read them
//! ([`mechanism`], one file each), the privacy configuration a user builds from both
//! ([`PrivacyConfig`]), the plan checked against the budget before the first step ([`plan()`]) and
//! the epsilon of a run's ledger with its label ([`accounted`]). Everything here sits below the
//! step: the layers that train (`step`, `engine`) read it, it reads none of them.

pub(crate) mod accounting;
pub(crate) mod config;
pub mod mechanism;
pub(crate) mod plan;
pub(crate) mod settings;
pub use accounting::{accountant, accounted, given_or_calibrated, sigma_privacy};
pub use config::PrivacyConfig;
pub use dp_kernels::clipping::Clipping;
pub use plan::{Plan, fresh_sampler, notes, plan, sampling};
pub use settings::{AccountantChoice, AccountantName, NoiseLevel, PrivacySettings, positive};
