//! An affine layer's input A [B, K, P] as its per-example gradients read it: given as a tensor
//! (a dense layer's features, a convolution whose forward pass multiplied its patches anyway), or
//! as a convolution's input x [B, C, H, W] whose patches A are, unfolded only where they are read:
//! on the CPU one example at a time into a thread's buffer (`host_products`), elsewhere all at
//! once by the im2col kernel the first time a tensor operation asks. The DP forward pass then
//! writes no [B, K, P] patches to memory (for WRN-16-4's first group 115 MB per layer at a lot
//! of 64) and the step holds x instead, K / C times smaller.

use super::merge_views;
use crate::host::flex::is_flex;
use crate::host::kernel_log::Layer;
use crate::host::patch_gram;
use burn::tensor::Tensor;
use dp_kernels::{Patches, im2col};
use std::cell::OnceCell;

/// A layer's input A [B, K, P].
pub enum LayerInput {
    /// A itself.
    Dense(Box<Tensor<3>>),
    /// A convolution's input whose patches are A.
    Patches(Box<ConvInput>),
}

/// A convolution's input and geometry, whose patches are a layer's A.
pub struct ConvInput {
    /// x [B, C, H, W], outside autodiff.
    pub x: Tensor<4>,
    /// The convolution's geometry.
    pub patches: Patches,
    /// The unfolded patches, once a tensor operation asked for them.
    unfolded: OnceCell<Tensor<3>>,
}

impl From<Tensor<3>> for LayerInput {
    fn from(a: Tensor<3>) -> Self {
        LayerInput::Dense(Box::new(a))
    }
}

impl LayerInput {
    /// The patches of `x` [B, C, H, W] (outside autodiff) for a convolution of geometry `patches`.
    pub fn patches(x: Tensor<4>, patches: Patches) -> Self {
        LayerInput::Patches(Box::new(ConvInput { x, patches, unfolded: OnceCell::new() }))
    }

    /// [B, K, P].
    pub fn dims(&self) -> [usize; 3] {
        match self {
            LayerInput::Dense(a) => a.dims(),
            LayerInput::Patches(conv) => {
                let ConvInput { x, patches, .. } = conv.as_ref();
                let [b, c, h, w] = x.dims();
                let [ho, wo] = patches.output_size([h, w]);
                [b, c * patches.kernel[0] * patches.kernel[1], ho * wo]
            }
        }
    }

    /// The operations of one example's Gram A_b^T A_b [P, P] on the host: from its pixels where
    /// that is cheaper (`host::patch_gram`), else P^2 K.
    pub(crate) fn gram_cost(&self) -> usize {
        let [_, k, p] = self.dims();
        let unfolded = (p * p).saturating_mul(k);
        match self {
            LayerInput::Dense(_) => unfolded,
            LayerInput::Patches(conv) => {
                let [_, c, h, w] = conv.x.dims();
                patch_gram::cheaper_cost(&conv.patches, [c, h, w]).unwrap_or(unfolded)
            }
        }
    }

    /// The layer of `outputs` outputs that reads it, as the kernel log names it.
    pub(crate) fn layer(&self, outputs: usize) -> Layer {
        match self {
            LayerInput::Dense(a) => Layer::Affine { input: a.dims(), outputs },
            LayerInput::Patches(conv) => Layer::conv(conv.x.dims(), outputs, conv.patches),
        }
    }

    /// Whether it lives on flex, the CPU backend.
    pub fn is_flex(&self) -> bool {
        match self {
            LayerInput::Dense(a) => is_flex(a),
            LayerInput::Patches(conv) => is_flex(&conv.x),
        }
    }

    /// A as a tensor (unfolded by the im2col kernel on x's device the first time).
    pub fn dense(&self) -> Tensor<3> {
        match self {
            LayerInput::Dense(a) => a.as_ref().clone(),
            LayerInput::Patches(conv) => {
                let ConvInput { x, patches, unfolded } = conv.as_ref();
                unfolded.get_or_init(|| im2col(x.clone(), patches).unwrap_or_else(|e| panic!("im2col: {e}"))).clone()
            }
        }
    }

    /// Every `views` consecutive examples as one (`merge_views`), as a tensor.
    pub fn merge_views(self, views: usize) -> Self {
        merge_views(self.dense(), views).into()
    }
}
