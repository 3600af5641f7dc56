//! Per-example gradients of ordinary Burn modules built from DP layers (`crate::nn`), without a
//! per-example loop (docs/MECHANISMS.md, "Per-example gradients of ordinary Burn modules").
//!
//! While [`tape::recording`] runs a user's forward pass, every DP layer records what its
//! per-example gradients need (its input, detached) and taps its output (`tap`: Burn 0.22 has no
//! module hooks and no gradients of non-leaf tensors, so the tap hands dL/dz to a 1x1 leaf's
//! gradient). One backward of the summed loss then gives dL/dz of every layer for the whole
//! batch, from which each layer's [`PerExampleGrads`] computes per-example squared norms and
//! (clipped) sums, keyed by the parameters' `ParamId`s. [`params::ParamTable`] lists a model's
//! parameters and refuses a parameter that no DP layer owns.

pub mod affine;
pub mod batch;
pub mod embedding;
pub(crate) mod host_products;
pub mod layer_input;
pub mod norm_method;
pub mod params;
pub mod scale_shift;
mod standardization;
mod tap;
pub mod tape;

use crate::error::{EngineError, Result};
use burn::module::ParamId;
use burn::tensor::Tensor;

/// The summed gradient of one parameter: flat, in the parameter's own (Burn) layout.
#[derive(Debug, Clone)]
pub struct ParamGrad {
    /// Which parameter.
    pub id: ParamId,
    /// The gradient, flattened row-major.
    pub value: Tensor<1>,
}

/// One DP layer's per-example gradients in one batch, from its record and its output gradient.
pub trait PerExampleGrads: Send {
    /// The squared L2 norm of each example's gradient over all of the layer's parameters, `[B]`.
    fn sq_norms(&mut self) -> Tensor<1>;

    /// The sum over examples of each example's gradient scaled by `factors` `[B]` (by one when
    /// None), one entry per parameter of the layer.
    fn weighted_sum(&self, factors: Option<&Tensor<1>>) -> Vec<ParamGrad>;

    /// The same layer's gradients with every `views` consecutive rows taken as one example
    /// (augmentation multiplicity: an example's gradient is the sum over its views, so that it is
    /// clipped once); refused by a layer that cannot group.
    fn group_views(self: Box<Self>, views: usize) -> Result<Box<dyn PerExampleGrads>> {
        let _ = views;
        Err(EngineError::Unsupported(
            "a DP layer of this model cannot group an example's views (PerExampleGrads::group_views)".into(),
        ))
    }
}

/// [B*V, X, P] to [B, X, V*P]: each group of `views` consecutive examples becomes one example whose
/// positions are its views' positions, view after view (what makes a sum over positions a sum
/// over views).
pub fn merge_views(t: Tensor<3>, views: usize) -> Tensor<3> {
    let [rows, x, p] = t.dims();
    let b = rows / views.max(1);
    t.reshape([b, views, x, p]).swap_dims(1, 2).reshape([b, x, views * p])
}

/// [B*V, M] to [B, M]: the sum over each group of `views` consecutive rows (materialised
/// per-example gradients of an example's views).
pub fn sum_views(t: Tensor<2>, views: usize) -> Tensor<2> {
    let [rows, m] = t.dims();
    let b = rows / views.max(1);
    t.reshape([b, views, m]).sum_dim(1).reshape([b, m])
}

/// Sums a tensor over everything but its first dimension: [B, ...] to `[B]`.
pub fn sum_per_example<const D: usize>(t: Tensor<D>) -> Tensor<1> {
    let b = t.dims()[0];
    t.flatten::<2>(1, D - 1).sum_dim(1).reshape([b])
}

/// sum_b s_b t_b over the examples (rows) of t [B, M] with factors s `[B]`, as one product s^T t
/// that reads t once (scaling, then summing, reads it twice and writes it once); the plain sum
/// without factors.
pub fn weighted_sum_examples(t: Tensor<2>, factors: Option<&Tensor<1>>) -> Tensor<1> {
    let [b, m] = t.dims();
    match factors {
        None => t.sum_dim(0).reshape([m]),
        Some(s) => s.clone().reshape([1, b]).matmul(t).reshape([m]),
    }
}

/// Scales each example (the first dimension) of `t` by `factors` `[B]`.
pub fn scale_examples<const D: usize>(t: Tensor<D>, factors: Option<&Tensor<1>>) -> Tensor<D> {
    match factors {
        None => t,
        Some(s) => {
            let mut dims = [1; D];
            dims[0] = s.dims()[0];
            t * s.clone().reshape(dims)
        }
    }
}
