//! Per-example gradients of an affine map z_p = W a_p + b applied at P positions of each example
//! (P = 1 for a dense layer on flat features, the sequence length for a dense layer on sequences,
//! the output pixels for a convolution, whose a_p are the unfolded input patches).
//!
//! With A_b = [a_1 .. a_P] [K, P] and G_b = dL/dz [N, P] for example b, its weight gradient is
//! G_b A_b^T [N, K] and its bias gradient the row sums of G_b. Squared norms without a loop:
//! - P = 1: the gradient has rank one, so ||G_b A_b^T||^2 = ||a_b||^2 ||g_b||^2;
//! - P^2 < N K ("ghost norm"): ||G_b A_b^T||^2 = <G_b^T G_b, A_b^T A_b>, two [P, P] Gram matrices;
//! - otherwise the [N, K] gradients are materialised with one batched matmul (and reused for the
//!   clipped sum).
//!
//! The clipped sum is one GEMM over all examples and positions ("book-keeping").

use super::{ParamGrad, PerExampleGrads, scale_examples, sum_per_example};
use burn::module::ParamId;
use burn::tensor::Tensor;

/// How the weight is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightLayout {
    /// [K, N] (Burn's Linear: [d_input, d_output]).
    InputMajor,
    /// [N, K...] (a convolution: [C_out, C_in, kh, kw]).
    OutputMajor,
}

/// Which way the squared norms of the weight gradients are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormMethod {
    /// One position per example: the gradient has rank one.
    RankOne,
    /// Gram matrices of the P positions (cheaper when P^2 < N K).
    Ghost,
    /// Materialise each example's [N, K] gradient.
    Materialize,
}

impl NormMethod {
    /// The cheapest method for `positions` P, `outputs` N and `inputs` K.
    pub fn cheapest(positions: usize, outputs: usize, inputs: usize) -> Self {
        if positions == 1 {
            NormMethod::RankOne
        } else if positions * positions < outputs * inputs {
            NormMethod::Ghost
        } else {
            NormMethod::Materialize
        }
    }
}

/// The per-example gradients of one affine layer in one batch.
pub struct AffineGrads {
    /// A [B, K, P].
    input: Tensor<3>,
    /// G [B, N, P].
    grad: Tensor<3>,
    weight: ParamId,
    layout: WeightLayout,
    bias: Option<ParamId>,
    method: NormMethod,
    /// The materialised per-example weight gradients [B, N, K], once computed.
    materialized: Option<Tensor<3>>,
}

impl AffineGrads {
    /// From the layer's inputs A [B, K, P] and output gradient G [B, N, P].
    pub fn new(
        input: Tensor<3>,
        grad: Tensor<3>,
        weight: ParamId,
        layout: WeightLayout,
        bias: Option<ParamId>,
    ) -> Self {
        let [_, k, p] = input.dims();
        let n = grad.dims()[1];
        let method = NormMethod::cheapest(p, n, k);
        Self { input, grad, weight, layout, bias, method, materialized: None }
    }

    /// A [B, K] and G [B, N] of a rank-one layer.
    fn rows(&self) -> (Tensor<2>, Tensor<2>) {
        let [b, k, _] = self.input.dims();
        let n = self.grad.dims()[1];
        (self.input.clone().reshape([b, k]), self.grad.clone().reshape([b, n]))
    }
}

impl PerExampleGrads for AffineGrads {
    fn sq_norms(&mut self) -> Tensor<1> {
        let weight = match self.method {
            NormMethod::RankOne => {
                let (a, g) = self.rows();
                sum_per_example(a.square()) * sum_per_example(g.square())
            }
            NormMethod::Ghost => {
                let gram_g = self.grad.clone().swap_dims(1, 2).matmul(self.grad.clone());
                let gram_a = self.input.clone().swap_dims(1, 2).matmul(self.input.clone());
                sum_per_example(gram_g * gram_a)
            }
            NormMethod::Materialize => {
                let per_example = self.grad.clone().matmul(self.input.clone().swap_dims(1, 2));
                let norms = sum_per_example(per_example.clone().square());
                self.materialized = Some(per_example);
                norms
            }
        };
        match self.bias {
            Some(_) => weight + sum_per_example(self.grad.clone().sum_dim(2).square()),
            None => weight,
        }
    }

    fn weighted_sum(&self, factors: Option<&Tensor<1>>) -> Vec<ParamGrad> {
        let [b, k, p] = self.input.dims();
        let n = self.grad.dims()[1];
        let g = scale_examples(self.grad.clone(), factors);
        let weight = match (self.method, &self.materialized, factors) {
            (NormMethod::RankOne, _, _) => {
                let (a, _) = self.rows();
                let g = g.clone().reshape([b, n]);
                match self.layout {
                    WeightLayout::InputMajor => a.transpose().matmul(g),
                    WeightLayout::OutputMajor => g.transpose().matmul(a),
                }
            }
            (NormMethod::Materialize, Some(per_example), Some(s)) => {
                let sum = scale_examples(per_example.clone(), Some(s)).sum_dim(0).reshape([n, k]);
                match self.layout {
                    WeightLayout::InputMajor => sum.transpose(),
                    WeightLayout::OutputMajor => sum,
                }
            }
            _ => {
                let g = g.clone().swap_dims(0, 1).reshape([n, b * p]);
                let a = self.input.clone().swap_dims(1, 2).reshape([b * p, k]);
                match self.layout {
                    WeightLayout::InputMajor => a.transpose().matmul(g.transpose()),
                    WeightLayout::OutputMajor => g.matmul(a),
                }
            }
        };
        let mut grads = vec![ParamGrad { id: self.weight, value: weight.reshape([n * k]) }];
        if let Some(id) = self.bias {
            grads.push(ParamGrad { id, value: g.sum_dim(2).sum_dim(0).reshape([n]) });
        }
        grads
    }
}
