//! What flows between layers: image feature maps [B, C, H, W] or flat features [B, F].

use burn::tensor::Tensor;

/// A batch of activations.
#[derive(Debug, Clone)]
pub enum Features {
    /// Feature maps [batch, channels, height, width].
    Image(Tensor<4>),
    /// Flat features [batch, features].
    Flat(Tensor<2>),
}

impl Features {
    /// As flat features [batch, everything else].
    pub fn into_flat(self) -> Tensor<2> {
        match self {
            Features::Image(t) => t.flatten(1, 3),
            Features::Flat(t) => t,
        }
    }

    /// Applies an element-wise function whatever the rank.
    pub fn map(self, f4: impl FnOnce(Tensor<4>) -> Tensor<4>, f2: impl FnOnce(Tensor<2>) -> Tensor<2>) -> Features {
        match self {
            Features::Image(t) => Features::Image(f4(t)),
            Features::Flat(t) => Features::Flat(f2(t)),
        }
    }
}
