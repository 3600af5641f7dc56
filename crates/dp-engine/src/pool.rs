//! Max pooling (parameter-free, so it needs no per-example treatment).

use burn::tensor::Tensor;
use burn::tensor::module::max_pool2d;
use burn::tensor::ops::MaxPoolOptions;

/// Square max pooling with a stride.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxPool {
    /// Window height and width.
    pub kernel: usize,
    /// Stride in both directions.
    pub stride: usize,
}

impl MaxPool {
    /// Pools each channel.
    pub fn apply(self, x: Tensor<4>) -> Tensor<4> {
        max_pool2d(x, MaxPoolOptions::new([self.kernel; 2]).with_stride([self.stride; 2]))
    }
}
