//! The rectified linear unit for `ops::activation`: max(x, 0) with NaN kept (as Burn's mask of
//! x <= 0), and the gradient passed where the output is positive (as Burn's `relu_backward`).

use crate::ops::pointwise::Pointwise;
use burn::backend::Backend;
use burn::backend::tensor::FloatTensor;

/// ReLU, with its gradient masked where the output is not positive.
pub struct Relu;

impl Pointwise for Relu {
    fn value(x: f32) -> f32 {
        if x <= 0.0 { 0.0 } else { x }
    }

    fn backward(y: f32, grad: f32) -> f32 {
        if y <= 0.0 { 0.0 } else { grad }
    }

    fn burn_value<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
        B::relu(x)
    }

    fn burn_backward<B: Backend>(y: FloatTensor<B>, grad: FloatTensor<B>) -> FloatTensor<B> {
        B::relu_backward(y, grad)
    }
}
