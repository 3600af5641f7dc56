//! The zoo's architectures as one Burn module: convolutions (each followed by the activation and
//! optionally max pooling), then dense layers (the activation between them). An ordinary
//! `#[derive(Module)]` struct of DP layers, trained exactly as a user's own model is.

use burn::module::Module;
use burn::tensor::Tensor;
use dp_engine::lots::ImageClassifier;
use dp_engine::nn::activation::Activation;
use dp_engine::nn::{Conv2d, Linear};
use dp_engine::ops::pool::MaxPool;

/// Convolutions, then dense layers.
#[derive(Module, Debug)]
pub struct ConvNet {
    /// The convolutions, in order.
    pub convs: Vec<Conv2d>,
    /// The dense layers, in order (the last gives the logits).
    pub dense: Vec<Linear>,
    /// Max pooling after each convolution, where there is one.
    #[module(skip)]
    pub pools: Vec<Option<MaxPool>>,
    /// The non-linearity after every layer but the last.
    #[module(skip)]
    pub activation: Activation,
    /// Groups of channels each example's input is standardised in first (ScatterNet models).
    #[module(skip)]
    pub input_groups: Option<usize>,
}

impl ImageClassifier for ConvNet {
    fn logits(&self, x: Tensor<4>) -> Tensor<2> {
        let mut h = match self.input_groups {
            Some(groups) => standardize(x, groups),
            None => x,
        };
        for (conv, pool) in self.convs.iter().zip(&self.pools) {
            h = self.activation.apply(conv.forward(h));
            if let Some(p) = pool {
                h = p.apply(h);
            }
        }
        let mut h = h.flatten::<2>(1, 3);
        let last = self.dense.len().saturating_sub(1);
        for (i, layer) in self.dense.iter().enumerate() {
            h = layer.forward(h);
            if i < last {
                h = self.activation.apply(h);
            }
        }
        h
    }
}

/// Each example's `x` [B, C, H, W] standardised (zero mean, unit variance, variance + 1e-5) in
/// `groups` groups of C / groups channels: GroupNorm without parameters, per example, so the
/// examples of a lot stay independent.
fn standardize(x: Tensor<4>, groups: usize) -> Tensor<4> {
    let [b, c, h, w] = x.dims();
    let grouped = x.reshape([b, groups, c / groups * h * w]);
    let centred = grouped.clone() - grouped.mean_dim(2);
    let variance = centred.clone().powi_scalar(2).mean_dim(2);
    (centred / (variance + 1e-5).sqrt()).reshape([b, c, h, w])
}
