//! Element-wise activations. Tanh is the "tempered sigmoid" that Papernot et al. (2021) found
//! better than ReLU under DP-SGD: bounded activations keep gradient norms, and so clipping, tame.

use crate::ops::pointwise::activate;
use burn::tensor::Tensor;
use serde::{Deserialize, Serialize};

/// A parameter-free non-linearity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Activation {
    /// Hyperbolic tangent (tempered sigmoid).
    Tanh,
    /// Rectified linear unit.
    Relu,
}

impl Activation {
    /// Applies the activation.
    pub fn apply<const D: usize>(self, x: Tensor<D>) -> Tensor<D> {
        activate(x, self)
    }
}
