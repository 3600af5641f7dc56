//! The entry point a Burn user adopts, as Opacus's `make_private`: [`PrivacyEngine`] checks the
//! privacy configuration, plans the run against its budget, dry-runs the model and the loss, and
//! wraps the user's burn-optim optimiser as a [`DpOptimizer`], whose `step` is one DP step and
//! whose `checkpoint` and `PrivacyEngine::resume` carry a run across processes.

pub(crate) mod builder;
pub(crate) mod optimizer;
pub use builder::PrivacyEngine;
pub use optimizer::DpOptimizer;
