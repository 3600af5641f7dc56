//! Per-example gradients of one DP layer without a per-example loop: the squared norms of every
//! example's gradient and the (clipped) sum over examples, computed from the layer's input a and
//! its output gradient g = dL/dz (the book-keeping trick: one GEMM per layer for the sum).
//!
//! Linear: example b's weight gradient is a_b^T g_b (rank one), so its squared norm is
//! ||a_b||^2 ||g_b||^2 and its bias gradient is g_b. Conv2d: with U_b = unfold(a_b) [K, P] and
//! g_b [Cout, P], the weight gradient is g_b U_b^T; its squared norm is read either from the
//! materialised [Cout, K] matrices or, when the number of output positions P is small
//! (P^2 < Cout*K), from the Gram matrices: ||g_b U_b^T||^2 = <g_b^T g_b, U_b^T U_b> ("ghost norm").

use crate::grad_sample::sum_per_example;
use burn::tensor::Tensor;

/// Which way a convolution's per-example norms are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvNormMethod {
    /// Materialise each example's [Cout, K] gradient with a batched matmul.
    Materialize,
    /// Gram matrices of the P output positions (cheaper when P^2 < Cout*K).
    Ghost,
}

impl ConvNormMethod {
    /// The cheaper method for `positions` output positions, `out_channels` and `patch` = Cin*k*k.
    pub fn cheaper(positions: usize, out_channels: usize, patch: usize) -> Self {
        if positions * positions < out_channels * patch { ConvNormMethod::Ghost } else { ConvNormMethod::Materialize }
    }
}

/// The operands of one layer's per-example gradients. (A few exist per step, so the size
/// difference between variants costs nothing worth a box.)
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum PerExampleGrad {
    /// A dense layer: input a [B, in] and output gradient g [B, out].
    Linear {
        /// a.
        input: Tensor<2>,
        /// g.
        grad: Tensor<2>,
    },
    /// A convolution: unfolded input U [B, K, P] and output gradient g [B, Cout, P].
    Conv {
        /// U.
        cols: Tensor<3>,
        /// g.
        grad: Tensor<3>,
        /// How norms are computed.
        method: ConvNormMethod,
        /// The materialised per-example weight gradients [B, Cout, K], once computed.
        materialized: Option<Tensor<3>>,
    },
}

impl PerExampleGrad {
    /// Squared L2 norm of each example's gradient (weight and bias together), shape [B].
    pub fn sq_norms(&mut self) -> Tensor<1> {
        match self {
            PerExampleGrad::Linear { input, grad } => {
                let g2 = sum_per_example(grad.clone().square());
                (sum_per_example(input.clone().square()).add_scalar(1.0)) * g2
            }
            PerExampleGrad::Conv { cols, grad, method, materialized } => {
                let weight = match method {
                    ConvNormMethod::Materialize => {
                        let per_example = grad.clone().matmul(cols.clone().swap_dims(1, 2));
                        let norms = sum_per_example(per_example.clone().square());
                        *materialized = Some(per_example);
                        norms
                    }
                    ConvNormMethod::Ghost => {
                        let gram_g = grad.clone().swap_dims(1, 2).matmul(grad.clone());
                        let gram_u = cols.clone().swap_dims(1, 2).matmul(cols.clone());
                        sum_per_example(gram_g * gram_u)
                    }
                };
                weight + sum_per_example(grad.clone().sum_dim(2).square())
            }
        }
    }

    /// Sum over examples of each example's gradient scaled by `factors` [B] (all ones when None):
    /// the weight gradient in the layer's storage layout and the bias gradient [1, out].
    pub fn weighted_sum(&self, factors: Option<&Tensor<1>>) -> [Tensor<2>; 2] {
        match self {
            PerExampleGrad::Linear { input, grad } => {
                let b = grad.dims()[0];
                let g = match factors {
                    Some(s) => grad.clone() * s.clone().reshape([b, 1]),
                    None => grad.clone(),
                };
                [input.clone().transpose().matmul(g.clone()), g.sum_dim(0)]
            }
            PerExampleGrad::Conv { cols, grad, materialized, .. } => {
                let [b, c_out, p] = grad.dims();
                let k = cols.dims()[1];
                let g = match factors {
                    Some(s) => grad.clone() * s.clone().reshape([b, 1, 1]),
                    None => grad.clone(),
                };
                let bias = g.clone().sum_dim(2).sum_dim(0).reshape([1, c_out]);
                let weight = match (materialized, factors) {
                    (Some(per_example), Some(s)) => {
                        (per_example.clone() * s.clone().reshape([b, 1, 1])).sum_dim(0).reshape([c_out, k])
                    }
                    _ => g
                        .swap_dims(0, 1)
                        .reshape([c_out, b * p])
                        .matmul(cols.clone().swap_dims(1, 2).reshape([b * p, k])),
                };
                [weight, bias]
            }
        }
    }
}
