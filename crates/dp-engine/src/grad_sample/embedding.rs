//! Per-example gradients of an embedding lookup z_t = W`[x_t]` over the T tokens of each example.
//! Example b's gradient puts sum over {t : x_t = v} of g_t in row v, so its squared norm is
//! sum_{t, t'} [x_t = x_t'] <g_t, g_t'>: the [T, T] Gram matrix of the output gradients masked by
//! token equality (a ghost norm; the [V, d] gradients are never materialised). The clipped sum is
//! one scatter-add of the scaled output gradients into the table's rows.

use super::{ParamGrad, PerExampleGrads, scale_examples, sum_per_example};
use crate::error::Result;
use burn::module::ParamId;
use burn::tensor::{IndexingUpdateOp, Int, Tensor};

/// The per-example gradients of one embedding table in one batch.
pub struct EmbeddingGrads {
    /// Token indices [B, T].
    tokens: Tensor<2, Int>,
    /// Output gradients [B, T, d].
    grad: Tensor<3>,
    /// Rows of the table V.
    rows: usize,
    weight: ParamId,
}

impl EmbeddingGrads {
    /// From the tokens [B, T], the output gradient [B, T, d] and the table's row count.
    pub fn new(tokens: Tensor<2, Int>, grad: Tensor<3>, rows: usize, weight: ParamId) -> Self {
        Self { tokens, grad, rows, weight }
    }
}

impl PerExampleGrads for EmbeddingGrads {
    fn sq_norms(&mut self) -> Tensor<1> {
        let [b, t] = self.tokens.dims();
        let gram = self.grad.clone().matmul(self.grad.clone().swap_dims(1, 2));
        let same = self
            .tokens
            .clone()
            .reshape([b, t, 1])
            .expand([b, t, t])
            .equal(self.tokens.clone().reshape([b, 1, t]).expand([b, t, t]))
            .float();
        sum_per_example(gram * same)
    }

    fn weighted_sum(&self, factors: Option<&Tensor<1>>) -> Vec<ParamGrad> {
        let [b, t, d] = self.grad.dims();
        let values = scale_examples(self.grad.clone(), factors).reshape([b * t, d]);
        let table = Tensor::<2>::zeros([self.rows, d], &values.device());
        let summed = table.select_assign(0, self.tokens.clone().reshape([b * t]), values, IndexingUpdateOp::Add);
        vec![ParamGrad { id: self.weight, value: summed.reshape([self.rows * d]) }]
    }

    /// An example's views are its tokens, view after view.
    fn group_views(self: Box<Self>, views: usize) -> Result<Box<dyn PerExampleGrads>> {
        let Self { tokens, grad, rows, weight } = *self;
        let [n, t, d] = grad.dims();
        let b = n / views.max(1);
        let (tokens, grad) = (tokens.reshape([b, views * t]), grad.reshape([b, views * t, d]));
        Ok(Box::new(Self { tokens, grad, rows, weight }))
    }
}
