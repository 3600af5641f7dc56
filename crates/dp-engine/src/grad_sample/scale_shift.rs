//! Per-example gradients of a per-channel scale and shift y = gamma_c xhat + beta_c applied to
//! normalised activations xhat at P positions (GroupNorm: the pixels of channel c; LayerNorm: the
//! positions of a sequence, with c the normalised feature). Example b's gradients are
//! sum_p G ∘ xhat (gamma) and sum_p G (beta), `[C]` each: materialised, they cost no more than the
//! forward pass. The shift is optional (burn-nn's LayerNorm may have none). On flex both come
//! from one parallel pass (`host::channel_sums`).

use super::{ParamGrad, PerExampleGrads, sum_per_example, sum_views, weighted_sum_examples};
use crate::error::Result;
use crate::host::channel_sums::channel_sums;
use crate::host::flex::{dims, on_flex};
use burn::module::ParamId;
use burn::tensor::{Tensor, TensorData};

/// The per-example gradients of one scale-and-shift in one batch.
pub struct ScaleShiftGrads {
    /// Per-example gamma gradients [B, C].
    gamma: Tensor<2>,
    /// Per-example beta gradients [B, C], with beta's id, where there is a shift.
    beta: Option<(Tensor<2>, ParamId)>,
    gamma_id: ParamId,
}

impl ScaleShiftGrads {
    /// From the normalised input xhat [B, C, P] and the output gradient G [B, C, P].
    pub fn new(normalized: Tensor<3>, grad: Tensor<3>, gamma_id: ParamId, beta_id: Option<ParamId>) -> Self {
        let shape = grad.dims();
        let [b, c, _] = shape;
        let on_host =
            on_flex(&normalized).zip(on_flex(&grad)).filter(|(x, g)| dims(x) == Some(shape) && dims(g) == Some(shape));
        let (gamma, beta) = match on_host {
            Some((x, g)) => {
                let (along, total) = channel_sums(x.storage::<f32>(), g.storage::<f32>(), shape);
                let device = grad.device();
                let tensor = |values: Vec<f32>| Tensor::<2>::from_data(TensorData::new(values, [b, c]), &device);
                (tensor(along), beta_id.map(|id| (tensor(total), id)))
            }
            None => {
                let gamma = (grad.clone() * normalized).sum_dim(2).reshape([b, c]);
                (gamma, beta_id.map(|id| (grad.sum_dim(2).reshape([b, c]), id)))
            }
        };
        Self { gamma, beta, gamma_id }
    }
}

impl PerExampleGrads for ScaleShiftGrads {
    fn sq_norms(&mut self) -> Tensor<1> {
        let gamma = sum_per_example(self.gamma.clone().square());
        match &self.beta {
            Some((beta, _)) => gamma + sum_per_example(beta.clone().square()),
            None => gamma,
        }
    }

    fn weighted_sum(&self, factors: Option<&Tensor<1>>) -> Vec<ParamGrad> {
        let sum = |t: &Tensor<2>| weighted_sum_examples(t.clone(), factors);
        let beta = self.beta.iter().map(|(beta, id)| ParamGrad { id: *id, value: sum(beta) });
        std::iter::once(ParamGrad { id: self.gamma_id, value: sum(&self.gamma) }).chain(beta).collect()
    }

    fn group_views(self: Box<Self>, views: usize) -> Result<Box<dyn PerExampleGrads>> {
        let Self { gamma, beta, gamma_id } = *self;
        let beta = beta.map(|(t, id)| (sum_views(t, views), id));
        Ok(Box::new(Self { gamma: sum_views(gamma, views), beta, gamma_id }))
    }
}
