//! Per-example gradients of a per-channel scale and shift y = gamma_c xhat + beta_c applied to
//! normalised activations xhat at P positions (GroupNorm: the pixels of channel c; LayerNorm: the
//! positions of a sequence, with c the normalised feature). Example b's gradients are
//! sum_p G ∘ xhat (gamma) and sum_p G (beta), [C] each: materialised, they cost no more than the
//! forward pass.

use super::{ParamGrad, PerExampleGrads, sum_per_example, weighted_sum_examples};
use burn::module::ParamId;
use burn::tensor::Tensor;

/// The per-example gradients of one scale-and-shift in one batch.
pub struct ScaleShiftGrads {
    /// Per-example gamma gradients [B, C].
    gamma: Tensor<2>,
    /// Per-example beta gradients [B, C].
    beta: Tensor<2>,
    gamma_id: ParamId,
    beta_id: ParamId,
}

impl ScaleShiftGrads {
    /// From the normalised input xhat [B, C, P] and the output gradient G [B, C, P].
    pub fn new(normalized: Tensor<3>, grad: Tensor<3>, gamma_id: ParamId, beta_id: ParamId) -> Self {
        let [b, c, _] = grad.dims();
        let gamma = (grad.clone() * normalized).sum_dim(2).reshape([b, c]);
        let beta = grad.sum_dim(2).reshape([b, c]);
        Self { gamma, beta, gamma_id, beta_id }
    }
}

impl PerExampleGrads for ScaleShiftGrads {
    fn sq_norms(&mut self) -> Tensor<1> {
        sum_per_example(self.gamma.clone().square()) + sum_per_example(self.beta.clone().square())
    }

    fn weighted_sum(&self, factors: Option<&Tensor<1>>) -> Vec<ParamGrad> {
        let sum = |t: &Tensor<2>| weighted_sum_examples(t.clone(), factors);
        vec![
            ParamGrad { id: self.gamma_id, value: sum(&self.gamma) },
            ParamGrad { id: self.beta_id, value: sum(&self.beta) },
        ]
    }
}
