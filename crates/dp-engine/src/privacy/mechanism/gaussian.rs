//! DP-SGD / DP-Adam (Abadi et al. 2016): each example's gradient clipped to C, the lot's sum
//! perturbed with N(0, (zC)^2) on every coordinate. Every default of the trait is this mechanism.

use super::registered::Registered;
use super::{Mechanism, MechanismName};
use std::sync::Arc;

/// The registry's entry: no options.
pub(super) const REGISTERED: Registered =
    Registered { name: MechanismName::Gaussian, options: &[], build: |_| Ok(Arc::new(Gaussian)) };

/// The Gaussian mechanism on clipped per-example gradients.
pub struct Gaussian;

impl Mechanism for Gaussian {
    fn name(&self) -> &'static str {
        "gaussian"
    }
}
