//! Element-wise activations (defined with their backend extension in `ops::activation`, named
//! here with the layers), and burn-nn's `Relu` and `Tanh` modules under their names, on them: one
//! parallel pass on flex each way, where burn-nn's run flex's single-threaded element-wise
//! operations.

pub use crate::ops::activation::Activation;

use burn::module::Module;
use burn::tensor::Tensor;

/// burn-nn's `Relu`.
#[derive(Module, Debug, Default)]
pub struct Relu;

impl Relu {
    /// The module.
    pub fn new() -> Self {
        Self
    }

    /// max(x, 0) of every element.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        Activation::Relu.apply(x)
    }
}

/// burn-nn's `Tanh`.
#[derive(Module, Debug, Default)]
pub struct Tanh;

impl Tanh {
    /// The module.
    pub fn new() -> Self {
        Self
    }

    /// tanh(x) of every element.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        Activation::Tanh.apply(x)
    }
}
