//! What the per-example norms of a weight-standardised layer (`Conv2d` with `standardize`)
//! need besides its inputs and output gradient (`affine`'s module comment has the formulas); read
//! by `affine`'s tensor operations and by `host_products` on the CPU.

use burn::tensor::Tensor;

/// A weight-standardised layer's standardisation in one batch.
pub(crate) struct Standardization {
    /// W^ [N, K].
    pub w_hat: Tensor<2>,
    /// 1 / s [N, 1].
    pub inv_std: Tensor<2>,
    /// W^ A_b [B, N, P]: the layer's output before its bias.
    pub projection: Tensor<3>,
}
