//! A zoo model of either family, as one Burn module (an enum module), so that the trainer, the
//! benchmark and the checkpoints handle every architecture the same way.

use super::{ConvNet, WideResNet};
use burn::module::Module;
use burn::tensor::Tensor;
use dp_engine::lots::ImageClassifier;

/// One of the zoo's architectures. A run holds one model, so the variants' size difference costs
/// nothing, and Burn has no `Module` for `Box` to even it out.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum ZooModel {
    /// Convolutions then dense layers (mnist-cnn, xiang-mnist, cifar10-cnn, logreg, mlp).
    Conv(ConvNet),
    /// The wide residual network (wrn-16-4).
    Wide(WideResNet),
}

impl ImageClassifier for ZooModel {
    fn logits(&self, x: Tensor<4>) -> Tensor<2> {
        match self {
            ZooModel::Conv(net) => net.logits(x),
            ZooModel::Wide(net) => net.logits(x),
        }
    }
}
