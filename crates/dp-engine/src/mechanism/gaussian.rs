//! DP-SGD / DP-Adam (Abadi et al. 2016): each example's gradient clipped to C, the lot's sum
//! perturbed with N(0, (zC)^2) on every coordinate. Every default of the trait is this mechanism.

use super::Mechanism;
use crate::train_config::MechanismName;

/// The Gaussian mechanism on clipped per-example gradients.
pub struct Gaussian;

impl Mechanism for Gaussian {
    fn name(&self) -> MechanismName {
        MechanismName::Gaussian
    }
}
