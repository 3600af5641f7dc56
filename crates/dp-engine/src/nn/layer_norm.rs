//! The DP layer normalisation over the last dimension (Ba et al. 2016): per-example by
//! construction. Per-example gradients of gamma and beta: `grad_sample::scale_shift`, with the
//! normalised feature as the channel and the other positions of the example summed over.

use crate::error::EngineError;
use crate::grad_sample::scale_shift::ScaleShiftGrads;
use crate::grad_sample::tape::{Finish, observe};
use crate::ops::normalize::normalize_rows;
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor};

/// Configuration of a [`LayerNorm`].
#[derive(Config, Debug)]
pub struct LayerNormConfig {
    /// Size of the normalised (last) dimension.
    pub d_model: usize,
    /// Added to the variance.
    #[config(default = 1e-5)]
    pub epsilon: f64,
    /// Whether the layer has a shift (beta), as burn-nn's `LayerNormConfig::bias`.
    #[config(default = true)]
    pub bias: bool,
}

/// LayerNorm with per-example gradients.
#[derive(Module, Debug)]
pub struct LayerNorm {
    /// Scale `[d]`.
    pub gamma: Param<Tensor<1>>,
    /// Shift `[d]`, where the layer has one.
    pub beta: Option<Param<Tensor<1>>>,
    /// Added to the variance.
    pub epsilon: f64,
}

impl LayerNormConfig {
    /// A layer on `device` (gamma = 1, beta = 0).
    pub fn init(&self, device: &Device) -> LayerNorm {
        LayerNorm {
            gamma: Param::from_tensor(Tensor::ones([self.d_model], device)),
            beta: self.bias.then(|| Param::from_tensor(Tensor::zeros([self.d_model], device))),
            epsilon: self.epsilon,
        }
    }
}

impl TryFrom<burn::nn::LayerNorm> for LayerNorm {
    type Error = EngineError;

    /// The same parameters (and records): a burn-nn LayerNorm fine-tuned with per-example
    /// gradients. Its epsilon is private in burn-nn; it is read from the layer's description
    /// (`epsilon: ...`), and a layer whose description lacks it is refused.
    fn try_from(layer: burn::nn::LayerNorm) -> Result<Self, EngineError> {
        let description = layer.to_string();
        let epsilon = description
            .split_once("epsilon: ")
            .and_then(|(_, rest)| rest.split([',', ' ', '}']).next())
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|e| e.is_finite() && *e >= 0.0)
            .ok_or_else(|| {
                EngineError::Unsupported(format!("cannot read the epsilon of a LayerNorm from `{description}`"))
            })?;
        Ok(LayerNorm { gamma: layer.gamma, beta: layer.beta, epsilon })
    }
}

impl LayerNorm {
    /// Normalises x [B, ..., d] over its last dimension.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let dims = x.dims();
        let (b, d) = (dims[0], dims[D - 1]);
        let positions = dims.iter().product::<usize>() / (b * d).max(1);
        let normalized = normalize_rows(x.reshape([b, positions, d]), self.epsilon).reshape(dims);
        let scaled = normalized.clone() * self.gamma.val().unsqueeze();
        let y = match &self.beta {
            Some(beta) => scaled + beta.val().unsqueeze(),
            None => scaled,
        };
        let (gamma, beta) = (self.gamma.id, self.beta.as_ref().map(|b| b.id));
        let ids: Vec<_> = std::iter::once(gamma).chain(beta).collect();
        observe("LayerNorm", &ids, y, || -> Finish {
            let xhat = normalized.inner().reshape([b, positions, d]).swap_dims(1, 2);
            Box::new(move |g: Tensor<2>| {
                let g = g.reshape([b, positions, d]).swap_dims(1, 2);
                Box::new(ScaleShiftGrads::new(xhat, g, gamma, beta))
            })
        })
    }
}
