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
//!
//! On flex (the CPU backend) the ghost and materialised norms, and every clipped sum that is not
//! rank one, run as one GEMM per example on the host (`host_products`), without the transposed
//! copies and batched results of the tensor path. There the method is chosen by arithmetic, not
//! memory ([`NormMethod::cheapest_on_host`]): a materialised layer's clipped sum is a weighted sum
//! of the kept gradients, a ghost layer's a second GEMM per example, so materialising costs
//! B N K P multiply-adds plus storing and re-reading B N K floats (cheaper where they fit in the
//! CPU's last-level cache) against the ghost norm's B P^2 (K + N) (less where a convolution's
//! patch Gram comes from its pixels, `host::patch_gram`) and the same B N K P again for its sum.
//!
//! A weight-standardised layer (`Conv2d` with `standardize`) computes with
//! W^ = (W - mean) / s per output row (s = sqrt(var + eps), over the row's K inputs), so its
//! parameter's gradient is J^T g with J^T g = (g - mean(g) - W^ mean(g ∘ W^)) / s per row, exact
//! with the eps. J^T is linear and the same for every example, so the sum still takes one GEMM
//! (J^T applied once, after it). Per row, J^T x = P x / s with P = I - u u^T - v v^T,
//! u = 1 / sqrt(K) and v = w^ / sqrt(K) orthogonal (w^ has mean 0), ||v||^2 = c = ||w^||^2 / K
//! (1 up to the eps), so ||J^T x||^2 = ||x'||^2 - (1.x')^2 / K - (2 - c) (w^.x')^2 / K with
//! x' = x / s. For x = G_b A_b^T: ||x'||^2 summed over rows is the ghost norm of G_b / s, 1.x'
//! contracts G_b / s with the column sums of A_b, and w^.x' with W^ A_b (the layer's output
//! before its bias): the ghost norm stays available, with O(B N P) more work. The subtraction
//! can cancel, so the result is raised by [`CANCELLATION_MARGIN`] of ||x'||^2: a norm is never
//! under-estimated by f32 rounding (which would under-clip), at the price of clipping a
//! gradient whose norm cancels almost entirely a little harder.

use super::host_products::{self, HostGradients};
use super::layer_input::LayerInput;
use super::norm_method::{CANCELLATION_MARGIN, NormMethod};
use super::standardization::Standardization;
use super::{ParamGrad, PerExampleGrads, merge_views, scale_examples, sum_per_example, weighted_sum_examples};
use crate::error::Result;
use crate::host::kernel_log::{Kernel, Layer, Pass, note};
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

/// The per-example gradients of one affine layer in one batch.
pub struct AffineGrads {
    /// A [B, K, P].
    input: LayerInput,
    /// G [B, N, P].
    grad: Tensor<3>,
    weight: ParamId,
    layout: WeightLayout,
    bias: Option<ParamId>,
    method: NormMethod,
    /// The materialised per-example weight gradients (before any standardisation Jacobian),
    /// once computed.
    materialized: Option<Materialized>,
    /// A weight-standardised layer's standardisation.
    standardization: Option<Standardization>,
    /// The layer the kernel log names (by default A's shape: [`LayerInput::layer`]).
    layer: Layer,
}

/// Materialised per-example weight gradients, where they were computed.
enum Materialized {
    /// [B, N, K], by Burn's tensor operations.
    Tensor(Box<Tensor<3>>),
    /// On the host (flex), kept by `host_products`.
    Host(HostGradients),
}

/// The cheapest norm method of a layer with inputs A [B, K, P] and output gradient G [B, N, P]:
/// by arithmetic on flex, by memory elsewhere.
fn method_for(input: &LayerInput, grad: &Tensor<3>, standardized: bool) -> NormMethod {
    let [b, k, p] = input.dims();
    let n = grad.dims()[1];
    match input.is_flex() {
        true => NormMethod::cheapest_on_host(b, p, n, k, input.gram_cost(), standardized),
        false => NormMethod::cheapest_for(p, n, k, standardized),
    }
}

/// ||G_b A_b^T||^2 per example from the two [P, P] Gram matrices.
fn ghost(grad: &Tensor<3>, input: &Tensor<3>) -> Tensor<1> {
    let gram_g = grad.clone().swap_dims(1, 2).matmul(grad.clone());
    let gram_a = input.clone().swap_dims(1, 2).matmul(input.clone());
    sum_per_example(gram_g * gram_a)
}

/// ||J^T G_b A_b^T||^2 per example of a standardised layer, without materialising (module doc).
fn standardized_ghost(grad: &Tensor<3>, input: &Tensor<3>, st: &Standardization) -> Tensor<1> {
    let [b, n, _] = grad.dims();
    let k = input.dims()[1] as f64;
    let g = grad.clone() * st.inv_std.clone().reshape([1, n, 1]);
    let full = ghost(&g, input);
    let ones = (g.clone() * input.clone().sum_dim(1)).sum_dim(2).reshape([b, n]);
    let along = (g * st.projection.clone()).sum_dim(2).reshape([b, n]);
    let c = st.w_hat.clone().square().sum_dim(1).reshape([1, n]).div_scalar(k);
    let removed = (ones.square() + along.square() * c.neg().add_scalar(2.0)).div_scalar(k);
    (full.clone() - sum_per_example(removed)).clamp_min(0.0) + full.mul_scalar(CANCELLATION_MARGIN)
}

/// J^T g for gradients g [..., N, K] with respect to W^ = standardise(W): the gradient with
/// respect to W, row by row (the module comment).
fn standardization_jacobian<const D: usize>(g: Tensor<D>, w_hat: &Tensor<2>, inv_std: &Tensor<2>) -> Tensor<D> {
    let [n, k] = w_hat.dims();
    let mut dims = [1; D];
    dims[D - 2] = n;
    dims[D - 1] = k;
    let w_hat = w_hat.clone().reshape(dims);
    dims[D - 1] = 1;
    let inv_std = inv_std.clone().reshape(dims);
    let mean = g.clone().mean_dim(D - 1);
    let along = (g.clone() * w_hat.clone()).mean_dim(D - 1);
    (g - mean - w_hat * along) * inv_std
}

impl AffineGrads {
    /// From the layer's inputs A [B, K, P] (a tensor, or a convolution's input whose patches they
    /// are) and output gradient G [B, N, P].
    pub fn new(
        input: impl Into<LayerInput>,
        grad: Tensor<3>,
        weight: ParamId,
        layout: WeightLayout,
        bias: Option<ParamId>,
    ) -> Self {
        let input = input.into();
        let method = method_for(&input, &grad, false);
        let layer = input.layer(grad.dims()[1]);
        Self { input, grad, weight, layout, bias, method, materialized: None, standardization: None, layer }
    }

    /// The same, named `layer` in the kernel log (a convolution whose patches were given).
    pub(crate) fn named(self, layer: Layer) -> Self {
        Self { layer, ..self }
    }

    /// The same layer computing with the standardised weight `w_hat` [N, K] (rows divided by
    /// their std: `inv_std` [N, 1] is 1 / s), whose output before the bias is `projection`
    /// [B, N, P]; a single position (rank one) is taken as a materialised gradient.
    pub fn standardized(self, w_hat: Tensor<2>, inv_std: Tensor<2>, projection: Tensor<3>) -> Self {
        let method = method_for(&self.input, &self.grad, true);
        Self { method, standardization: Some(Standardization { w_hat, inv_std, projection }), ..self }
    }

    /// The weight's squared norms [B] by the layer's method, with Burn's tensor operations.
    fn weight_sq_norms(&mut self) -> Tensor<1> {
        match self.method {
            NormMethod::RankOne => {
                let (a, g) = self.rows();
                sum_per_example(a.square()) * sum_per_example(g.square())
            }
            NormMethod::Ghost => match &self.standardization {
                Some(st) => standardized_ghost(&self.grad, &self.input.dense(), st),
                None => ghost(&self.grad, &self.input.dense()),
            },
            NormMethod::Materialize => {
                let per_example = self.grad.clone().matmul(self.input.dense().swap_dims(1, 2));
                let of_weight = match &self.standardization {
                    Some(st) => standardization_jacobian(per_example.clone(), &st.w_hat, &st.inv_std),
                    None => per_example.clone(),
                };
                self.materialized = Some(Materialized::Tensor(Box::new(per_example)));
                sum_per_example(of_weight.square())
            }
        }
    }

    /// The weighted sum [N, K] or [K, N] (by the layout) from the host's [N, K] `sum`, or by
    /// Burn's tensor operations where there is none (another backend): one GEMM over all
    /// examples and positions.
    fn host_sum_or_tensor(&self, sum: Option<Tensor<2>>, factors: Option<&Tensor<1>>) -> Tensor<2> {
        let [b, k, p] = self.input.dims();
        let n = self.grad.dims()[1];
        match sum {
            Some(sum) if self.layout == WeightLayout::InputMajor => sum.transpose(),
            Some(sum) => sum,
            None => {
                self.note(Pass::ClippedSum, Kernel::Tensor);
                let g = scale_examples(self.grad.clone(), factors).swap_dims(0, 1).reshape([n, b * p]);
                let a = self.input.dense().swap_dims(1, 2).reshape([b * p, k]);
                match self.layout {
                    WeightLayout::InputMajor => a.transpose().matmul(g.transpose()),
                    WeightLayout::OutputMajor => g.matmul(a),
                }
            }
        }
    }

    /// Notes in the kernel log that `kernel` ran this layer's `pass`.
    fn note(&self, pass: Pass, kernel: Kernel) {
        note(&self.layer, pass, kernel);
    }

    /// A [B, K] and G [B, N] of a rank-one layer.
    fn rows(&self) -> (Tensor<2>, Tensor<2>) {
        let [b, k, _] = self.input.dims();
        let n = self.grad.dims()[1];
        (self.input.dense().reshape([b, k]), self.grad.clone().reshape([b, n]))
    }
}

impl PerExampleGrads for AffineGrads {
    fn sq_norms(&mut self) -> Tensor<1> {
        let on_host = match self.method {
            NormMethod::RankOne => None,
            method => host_products::sq_norms(&self.input, &self.grad, method, self.standardization.as_ref()),
        };
        let (weight, kernel) = match on_host {
            Some((norms, materialized, kernel)) => {
                self.materialized = materialized.map(Materialized::Host);
                (norms, kernel)
            }
            None => {
                let kernel = match self.method {
                    NormMethod::RankOne => Kernel::RankOne,
                    NormMethod::Ghost => Kernel::GhostTensor,
                    NormMethod::Materialize => Kernel::PerExampleTensor,
                };
                (self.weight_sq_norms(), kernel)
            }
        };
        self.note(Pass::Norms, kernel);
        match self.bias {
            Some(_) => weight + sum_per_example(self.grad.clone().sum_dim(2).square()),
            None => weight,
        }
    }

    fn weighted_sum(&self, factors: Option<&Tensor<1>>) -> Vec<ParamGrad> {
        let [b, k, _] = self.input.dims();
        let n = self.grad.dims()[1];
        let weight = match (self.method, &self.materialized, factors) {
            (NormMethod::RankOne, _, _) => {
                self.note(Pass::ClippedSum, Kernel::RankOne);
                let (a, _) = self.rows();
                let g = scale_examples(self.grad.clone(), factors).reshape([b, n]);
                match self.layout {
                    WeightLayout::InputMajor => a.transpose().matmul(g),
                    WeightLayout::OutputMajor => g.transpose().matmul(a),
                }
            }
            (NormMethod::Materialize, Some(Materialized::Tensor(per_example)), Some(s)) => {
                self.note(Pass::ClippedSum, Kernel::KeptPerExample);
                let sum =
                    weighted_sum_examples(per_example.as_ref().clone().reshape([b, n * k]), Some(s)).reshape([n, k]);
                match self.layout {
                    WeightLayout::InputMajor => sum.transpose(),
                    WeightLayout::OutputMajor => sum,
                }
            }
            (_, Some(Materialized::Host(kept)), _) => {
                let sum = kept.weighted_sum(factors, &self.grad.device());
                if sum.is_some() {
                    self.note(Pass::ClippedSum, Kernel::KeptPerExample);
                }
                self.host_sum_or_tensor(sum, factors)
            }
            _ => self.host_sum_or_tensor(host_products::weighted_sum(&self.input, &self.grad, factors), factors),
        };
        let weight = match &self.standardization {
            Some(st) if self.layout == WeightLayout::OutputMajor => {
                standardization_jacobian(weight, &st.w_hat, &st.inv_std)
            }
            Some(st) => standardization_jacobian(weight.transpose(), &st.w_hat, &st.inv_std).transpose(),
            None => weight,
        };
        let mut grads = vec![ParamGrad { id: self.weight, value: weight.reshape([n * k]) }];
        if let Some(id) = self.bias {
            grads.push(ParamGrad {
                id,
                value: weighted_sum_examples(self.grad.clone().sum_dim(2).reshape([b, n]), factors),
            });
        }
        grads
    }

    /// An example's views are its positions, view after view: the norm method is chosen again
    /// for V * P positions.
    fn group_views(self: Box<Self>, views: usize) -> Result<Box<dyn PerExampleGrads>> {
        let Self { input, grad, weight, layout, bias, standardization, layer, .. } = *self;
        let (input, grad) = (input.merge_views(views), merge_views(grad, views));
        let method = method_for(&input, &grad, standardization.is_some());
        let standardization =
            standardization.map(|st| Standardization { projection: merge_views(st.projection, views), ..st });
        let materialized = None;
        Ok(Box::new(Self { input, grad, weight, layout, bias, method, materialized, standardization, layer }))
    }
}
