//! What an element-wise activation computes (`ops::activation` runs it on each backend): its value
//! on the host, its backward from its output, and both in Burn's operations for the backends
//! without a pass of their own. Implementations: `ops::tanh`, `ops::relu`.

use burn::backend::Backend;
use burn::backend::tensor::FloatTensor;

/// An element-wise function whose derivative is a function of its output.
pub trait Pointwise {
    /// f(x), branch-free (selects only), so that the compiler vectorises it.
    fn value(x: f32) -> f32;
    /// dL/dx from the output y = f(x) and its gradient dL/dy.
    fn backward(y: f32, grad: f32) -> f32;
    /// f in Burn's operations, on the backends without a pass of their own.
    fn burn_value<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B>;
    /// The backward in Burn's operations.
    fn burn_backward<B: Backend>(y: FloatTensor<B>, grad: FloatTensor<B>) -> FloatTensor<B>;
}
