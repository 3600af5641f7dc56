//! The models dptrain knows by name.
//!
//! - `mnist-cnn`: the TF Privacy / Opacus MNIST tutorial CNN (conv 16 8x8/2 pad 3, maxpool 2/1,
//!   conv 32 4x4/2, maxpool 2/1, fc 32, fc classes).
//! - `xiang-mnist`: seed 004's MNIST model, 2 conv + 2 fc with 128 hidden units. The paper gives
//!   only those counts; the convolutions are TensorFlow's MNIST tutorial ones (5x5, 32 and 64
//!   channels, same padding, maxpool 2/2), which its framework was built on.
//! - `cifar10-cnn`: seed 004's CIFAR-10 model, 6 conv + 3 fc; reconstructed as three VGG blocks
//!   (3x3 convs of 32, 32 | 64, 64 | 128, 128 channels, maxpool 2/2 after each block), fc 128,
//!   fc 128, fc classes.
//! - `logreg`: multinomial logistic regression on the flattened input.
//! - `mlp`: one hidden layer (as wide as the input unless `hidden` says otherwise).
//!
//! BatchNorm is refused: it mixes the examples of a batch, so no per-example gradient exists and
//! DP-SGD's sensitivity argument fails; GroupNorm is the DP-compatible replacement.

use crate::activation::Activation;
use crate::conv2d::{ConvShape, DpConv2d};
use crate::error::{EngineError, Result};
use crate::linear::DpLinear;
use crate::model::{Layer, Model};
use crate::pool::MaxPool;
use burn::tensor::Device;
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// A model architecture by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelName {
    /// The TF Privacy / Opacus MNIST tutorial CNN.
    MnistCnn,
    /// Seed 004's MNIST model (2 conv + 2 fc, 128 hidden units).
    XiangMnist,
    /// Seed 004's CIFAR-10 model (6 conv + 3 fc).
    Cifar10Cnn,
    /// Multinomial logistic regression.
    Logreg,
    /// One-hidden-layer perceptron.
    Mlp,
}

impl ModelName {
    /// Every model, for help texts.
    pub const ALL: [ModelName; 5] =
        [ModelName::MnistCnn, ModelName::XiangMnist, ModelName::Cifar10Cnn, ModelName::Logreg, ModelName::Mlp];

    /// The name users type.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelName::MnistCnn => "mnist-cnn",
            ModelName::XiangMnist => "xiang-mnist",
            ModelName::Cifar10Cnn => "cifar10-cnn",
            ModelName::Logreg => "logreg",
            ModelName::Mlp => "mlp",
        }
    }
}

impl FromStr for ModelName {
    type Err = EngineError;

    fn from_str(s: &str) -> Result<Self> {
        ModelName::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| {
            let names: Vec<_> = ModelName::ALL.iter().map(|m| m.as_str()).collect();
            EngineError::invalid("model", format!("'{s}' is not one of {}", names.join(", ")))
        })
    }
}

/// Normalisation layers a user may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Normalization {
    /// No normalisation layer.
    None,
    /// BatchNorm: refused under DP.
    Batch,
}

/// Everything that defines an architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// The architecture.
    pub name: ModelName,
    /// Its non-linearity.
    pub activation: Activation,
    /// Hidden width of `mlp` (default: the input width).
    pub hidden: Option<usize>,
    /// Normalisation layers.
    pub normalization: Normalization,
}

/// The shape of the features between layers while a model is built.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Image([usize; 3]),
    Flat(usize),
}

struct Builder<'a> {
    layers: Vec<Layer>,
    shape: Shape,
    activation: Activation,
    rng: &'a mut ChaCha20Rng,
    device: &'a Device,
}

impl Builder<'_> {
    fn conv(&mut self, out_channels: usize, kernel: usize, stride: usize, padding: usize) -> Result<&mut Self> {
        let Shape::Image([c, h, w]) = self.shape else {
            return Err(EngineError::Unsupported("a convolution needs image input".into()));
        };
        if h + 2 * padding < kernel || w + 2 * padding < kernel {
            return Err(EngineError::Unsupported(format!("input {h}x{w} is smaller than a {kernel}x{kernel} kernel")));
        }
        let shape = ConvShape { in_channels: c, out_channels, kernel, stride, padding };
        self.shape = Shape::Image([out_channels, shape.output_size(h), shape.output_size(w)]);
        self.layers.push(Layer::Conv(DpConv2d::new(shape, self.rng, self.device)));
        self.layers.push(Layer::Activation(self.activation));
        Ok(self)
    }

    fn pool(&mut self, kernel: usize, stride: usize) -> Result<&mut Self> {
        let Shape::Image([c, h, w]) = self.shape else {
            return Err(EngineError::Unsupported("pooling needs image input".into()));
        };
        if h < kernel || w < kernel {
            return Err(EngineError::Unsupported(format!("input {h}x{w} is too small to pool {kernel}x{kernel}")));
        }
        self.shape = Shape::Image([c, (h - kernel) / stride + 1, (w - kernel) / stride + 1]);
        self.layers.push(Layer::MaxPool(MaxPool { kernel, stride }));
        Ok(self)
    }

    fn flatten(&mut self) -> &mut Self {
        if let Shape::Image([c, h, w]) = self.shape {
            self.shape = Shape::Flat(c * h * w);
            self.layers.push(Layer::Flatten);
        }
        self
    }

    fn width(&self) -> usize {
        match self.shape {
            Shape::Image([c, h, w]) => c * h * w,
            Shape::Flat(f) => f,
        }
    }

    /// A dense layer, followed by the activation unless it is the output layer.
    fn dense(&mut self, out: usize, activated: bool) -> &mut Self {
        self.flatten();
        let d_in = self.width();
        self.layers.push(Layer::Linear(DpLinear::new(d_in, out, self.rng, self.device)));
        if activated {
            self.layers.push(Layer::Activation(self.activation));
        }
        self.shape = Shape::Flat(out);
        self
    }
}

/// Builds `spec` for inputs of `input` shape ([C, H, W], or [1, 1, F] for tabular rows) and
/// `classes` outputs, initialised from `rng`.
pub fn build(
    spec: ModelSpec,
    input: [usize; 3],
    classes: usize,
    rng: &mut ChaCha20Rng,
    device: &Device,
) -> Result<Model> {
    if spec.normalization == Normalization::Batch {
        return Err(EngineError::Unsupported(
            "BatchNorm has no DP implementation (it mixes the examples of a batch, so per-example \
             gradients and their clipping are undefined); use GroupNorm, which normalises each example on its \
             own (not yet in dptrain's model zoo), or --normalization none"
                .into(),
        ));
    }
    if classes < 2 {
        return Err(EngineError::invalid("classes", format!("{classes}: a classifier needs at least 2")));
    }
    let mut b = Builder { layers: Vec::new(), shape: Shape::Image(input), activation: spec.activation, rng, device };
    match spec.name {
        ModelName::MnistCnn => {
            b.conv(16, 8, 2, 3)?.pool(2, 1)?.conv(32, 4, 2, 0)?.pool(2, 1)?.dense(32, true).dense(classes, false);
        }
        ModelName::XiangMnist => {
            b.conv(32, 5, 1, 2)?.pool(2, 2)?.conv(64, 5, 1, 2)?.pool(2, 2)?.dense(128, true).dense(classes, false);
        }
        ModelName::Cifar10Cnn => {
            for channels in [32, 64, 128] {
                b.conv(channels, 3, 1, 1)?.conv(channels, 3, 1, 1)?.pool(2, 2)?;
            }
            b.dense(128, true).dense(128, true).dense(classes, false);
        }
        ModelName::Logreg => {
            b.dense(classes, false);
        }
        ModelName::Mlp => {
            let hidden = spec.hidden.unwrap_or_else(|| input.iter().product());
            if hidden == 0 {
                return Err(EngineError::invalid("hidden", "the hidden layer needs at least one unit"));
            }
            b.dense(hidden, true).dense(classes, false);
        }
    }
    Ok(Model::new(b.layers))
}
