//! The DP group normalisation (Wu & He 2018): each example's channels are split into groups,
//! each normalised over its channels and pixels, then scaled and shifted per channel. It
//! normalises every example on its own, which makes it the DP replacement for BatchNorm (De et
//! al. 2022). Per-example gradients of gamma and beta: `grad_sample::scale_shift`.

use crate::error::EngineError;
use crate::grad_sample::scale_shift::ScaleShiftGrads;
use crate::grad_sample::tape::{Finish, observe};
use crate::ops::normalize::normalize_rows;
use crate::ops::scale_shift::scale_shift;
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor};

/// Configuration of a [`GroupNorm`].
#[derive(Config, Debug)]
pub struct GroupNormConfig {
    /// Groups the channels are split into (must divide the channels).
    pub num_groups: usize,
    /// Channels of the input.
    pub num_channels: usize,
    /// Added to the variance.
    #[config(default = 1e-5)]
    pub epsilon: f64,
}

/// GroupNorm with per-example gradients (always affine: without gamma and beta it has no
/// parameter, and burn-nn's GroupNorm with `affine = false` serves).
#[derive(Module, Debug)]
pub struct GroupNorm {
    /// Scale `[C]`.
    pub gamma: Param<Tensor<1>>,
    /// Shift `[C]`.
    pub beta: Param<Tensor<1>>,
    /// Groups.
    pub num_groups: usize,
    /// Added to the variance.
    pub epsilon: f64,
}

impl GroupNormConfig {
    /// A layer on `device` (gamma = 1, beta = 0). Panics when the groups do not divide the
    /// channels, as burn-nn's does.
    pub fn init(&self, device: &Device) -> GroupNorm {
        assert!(
            self.num_groups > 0 && self.num_channels.is_multiple_of(self.num_groups),
            "{} groups do not divide {} channels",
            self.num_groups,
            self.num_channels
        );
        GroupNorm {
            gamma: Param::from_tensor(Tensor::ones([self.num_channels], device)),
            beta: Param::from_tensor(Tensor::zeros([self.num_channels], device)),
            num_groups: self.num_groups,
            epsilon: self.epsilon,
        }
    }
}

impl TryFrom<burn::nn::GroupNorm> for GroupNorm {
    type Error = EngineError;

    /// The same parameters (and records): a burn-nn GroupNorm fine-tuned with per-example
    /// gradients. One without `affine` has no parameter and needs no conversion.
    fn try_from(layer: burn::nn::GroupNorm) -> Result<Self, EngineError> {
        match (layer.gamma, layer.beta) {
            (Some(gamma), Some(beta)) => {
                Ok(GroupNorm { gamma, beta, num_groups: layer.num_groups, epsilon: layer.epsilon })
            }
            _ => Err(EngineError::Unsupported(
                "a GroupNorm without affine parameters has no per-example gradient to compute: keep burn-nn's".into(),
            )),
        }
    }
}

impl GroupNorm {
    /// Normalises x [B, C, ...].
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let dims = x.dims();
        let (b, c) = (dims[0], dims[1]);
        let positions = dims.iter().product::<usize>() / (b * c).max(1);
        let grouped = x.reshape([b, self.num_groups, c / self.num_groups * positions]);
        let normalized = normalize_rows(grouped, self.epsilon).reshape([b, c, positions]);
        let y = scale_shift(normalized.clone(), self.gamma.val(), self.beta.val());
        let (gamma, beta) = (self.gamma.id, self.beta.id);
        let y = observe("GroupNorm", &[gamma, beta], y, || -> Finish {
            let xhat = normalized.inner();
            Box::new(move |g: Tensor<2>| {
                Box::new(ScaleShiftGrads::new(xhat, g.reshape([b, c, positions]), gamma, Some(beta)))
            })
        });
        y.reshape(dims)
    }
}
