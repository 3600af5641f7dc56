//! The models dptrain knows by name.
//!
//! - `mnist-cnn`: the TF Privacy / Opacus MNIST tutorial CNN (conv 16 8x8/2 pad 3, maxpool 2/1,
//!   conv 32 4x4/2, maxpool 2/1, fc 32, fc classes).
//! - `xiang-mnist`: Xiang et al.'s MNIST model, 2 conv + 2 fc with 128 hidden units. The paper gives
//!   only those counts; the convolutions are TensorFlow's MNIST tutorial ones (5x5, 32 and 64
//!   channels, same padding, maxpool 2/2), which its framework was built on.
//! - `cifar10-cnn`: Xiang et al.'s CIFAR-10 model, 6 conv + 3 fc; reconstructed as three VGG blocks
//!   (3x3 convs of 32, 32 | 64, 64 | 128, 128 channels, maxpool 2/2 after each block), fc 128,
//!   fc 128, fc classes.
//! - `logreg`: multinomial logistic regression on the flattened input.
//! - `mlp`: one hidden layer (as wide as the input unless `hidden` says otherwise).
//! - `wrn-16-4`: De et al. 2022's wide residual network with GroupNorm and weight-standardised
//!   convolutions (`wide_resnet`).
//! - `scatnet-linear`, `scatnet-cnn`: Tramèr and Boneh 2021's heads on ScatterNet features (the
//!   scattering transform with J = 2, L = 8: 81 channels per image channel at a quarter of the
//!   resolution, computed once by `crate::scattered`), each feature map standardised in 27
//!   groups of channels (GroupNorm without parameters), then a linear layer; or, for 28 x 28
//!   images, conv 16 3x3/2 pad 1, conv 32 3x3/1 pad 1, fc 32, fc classes, and for 32 x 32 ones
//!   conv 64 3x3 pad 1, maxpool 2/2, conv 64 3x3 pad 1, fc classes (their `MNIST_CNN` and
//!   `CIFAR10_CNN` on scattering input).
//!
//! BatchNorm is refused: it mixes the examples of a batch, so no per-example gradient exists and
//! DP-SGD's sensitivity argument fails; GroupNorm is the DP-compatible replacement.

mod conv_net;
mod footprint;
mod wide_resnet;
mod zoo_model;

pub use conv_net::ConvNet;
pub use footprint::Footprint;
pub use wide_resnet::{WideBlock, WideResNet};
pub use zoo_model::ZooModel;

use burn::tensor::Device;
use dp_engine::error::{EngineError, Result};
use dp_engine::nn::activation::Activation;
use dp_engine::nn::init::seeded;
use dp_engine::nn::{Conv2dConfig, LinearConfig, PaddingConfig2d};
use dp_engine::ops::pool::MaxPool;
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// A model architecture by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelName {
    /// The TF Privacy / Opacus MNIST tutorial CNN.
    MnistCnn,
    /// Xiang et al.'s MNIST model (2 conv + 2 fc, 128 hidden units).
    XiangMnist,
    /// Xiang et al.'s CIFAR-10 model (6 conv + 3 fc).
    Cifar10Cnn,
    /// Multinomial logistic regression.
    Logreg,
    /// One-hidden-layer perceptron.
    Mlp,
    /// WRN-16-4 with GroupNorm and weight standardisation (De et al. 2022).
    #[serde(rename = "wrn-16-4")]
    Wrn16x4,
    /// Tramèr and Boneh's linear model on ScatterNet features.
    ScatnetLinear,
    /// Tramèr and Boneh's small CNN on ScatterNet features.
    ScatnetCnn,
}

impl ModelName {
    /// Every model, for help texts.
    pub const ALL: [ModelName; 8] = [
        ModelName::MnistCnn,
        ModelName::XiangMnist,
        ModelName::Cifar10Cnn,
        ModelName::Logreg,
        ModelName::Mlp,
        ModelName::Wrn16x4,
        ModelName::ScatnetLinear,
        ModelName::ScatnetCnn,
    ];

    /// The name users type.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelName::MnistCnn => "mnist-cnn",
            ModelName::XiangMnist => "xiang-mnist",
            ModelName::Cifar10Cnn => "cifar10-cnn",
            ModelName::Logreg => "logreg",
            ModelName::Mlp => "mlp",
            ModelName::Wrn16x4 => "wrn-16-4",
            ModelName::ScatnetLinear => "scatnet-linear",
            ModelName::ScatnetCnn => "scatnet-cnn",
        }
    }

    /// True when the model reads ScatterNet features of the images, not their pixels.
    pub fn reads_scattering(self) -> bool {
        matches!(self, ModelName::ScatnetLinear | ModelName::ScatnetCnn)
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

/// The shape of the features between layers while a model is planned.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Image([usize; 3]),
    Flat(usize),
}

/// One layer of a convolutions-then-dense-layers model, as planned.
#[derive(Debug, Clone, Copy)]
enum Layer {
    /// Each example's input standardised in this many groups of channels.
    Standardize(usize),
    Conv {
        channels: [usize; 2],
        kernel: usize,
        stride: usize,
        padding: usize,
    },
    Pool(MaxPool),
    Dense {
        d_in: usize,
        d_out: usize,
    },
}

/// A model planned layer by layer from shapes alone: nothing is allocated until
/// [`Builder::build`], so its size is checked first.
struct Builder {
    layers: Vec<Layer>,
    shape: Shape,
    footprint: Footprint,
}

/// Groups of ScatterNet channels standardised together (Tramèr and Boneh's 27: 3 channels of
/// 81 each, for one image channel).
const SCATTERING_GROUPS: usize = 27;

/// The most scalar parameters a zoo model may have (4 GiB of f32): larger sizes are refused
/// from arithmetic before anything is allocated.
const MAX_PARAMS: usize = 1 << 30;

impl Builder {
    /// Counts a layer's `weights` and `biases`, refusing a model beyond [`MAX_PARAMS`].
    fn count(&mut self, fan_in: usize, outputs: usize) -> Result<()> {
        let layer = fan_in.checked_add(1).and_then(|k| k.checked_mul(outputs));
        let params = layer.and_then(|l| l.checked_add(self.footprint.params as usize)).filter(|&p| p <= MAX_PARAMS);
        self.footprint.params = params.ok_or_else(|| {
            EngineError::invalid(
                "model size",
                format!(
                    "a layer of {fan_in} x {outputs} weights is beyond the {MAX_PARAMS} parameters a model may have"
                ),
            )
        })? as u128;
        Ok(())
    }

    fn conv(&mut self, out_channels: usize, kernel: usize, stride: usize, padding: usize) -> Result<&mut Self> {
        let Shape::Image([c, h, w]) = self.shape else {
            return Err(EngineError::Unsupported("a convolution needs image input".into()));
        };
        if h + 2 * padding < kernel || w + 2 * padding < kernel {
            return Err(EngineError::Unsupported(format!("input {h}x{w} is smaller than a {kernel}x{kernel} kernel")));
        }
        self.count(c * kernel * kernel, out_channels)?;
        let out = |n: usize| (n + 2 * padding - kernel) / stride + 1;
        let (ho, wo) = (out(h), out(w));
        self.footprint.add_conv(c, out_channels, kernel, [ho, wo]);
        self.shape = Shape::Image([out_channels, ho, wo]);
        self.layers.push(Layer::Conv { channels: [c, out_channels], kernel, stride, padding });
        Ok(self)
    }

    /// Standardises each example's input in `groups` groups of channels (Tramèr and Boneh's
    /// GroupNorm without parameters on ScatterNet features).
    fn standardize(&mut self, groups: usize) -> Result<&mut Self> {
        let Shape::Image([c, ..]) = self.shape else {
            return Err(EngineError::Unsupported("group standardisation needs image input".into()));
        };
        if groups == 0 || !c.is_multiple_of(groups) {
            return Err(EngineError::Unsupported(format!("{c} channels do not split into {groups} groups")));
        }
        self.footprint.add_activations(self.width());
        self.layers.push(Layer::Standardize(groups));
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
        self.footprint.add_activations(self.width());
        self.layers.push(Layer::Pool(MaxPool { kernel, stride }));
        Ok(self)
    }

    fn width(&self) -> usize {
        match self.shape {
            Shape::Image([c, h, w]) => c * h * w,
            Shape::Flat(f) => f,
        }
    }

    /// A dense layer (the activation follows every dense layer but the last).
    fn dense(&mut self, out: usize) -> Result<&mut Self> {
        let d_in = self.width();
        self.count(d_in, out)?;
        self.footprint.add_activations(out);
        self.layers.push(Layer::Dense { d_in, d_out: out });
        self.shape = Shape::Flat(out);
        Ok(self)
    }

    /// The planned model on `device`.
    fn build(&self, activation: Activation, device: &Device) -> ConvNet {
        let mut net =
            ConvNet { convs: Vec::new(), dense: Vec::new(), pools: Vec::new(), activation, input_groups: None };
        for layer in &self.layers {
            match *layer {
                Layer::Standardize(groups) => net.input_groups = Some(groups),
                Layer::Conv { channels, kernel, stride, padding } => {
                    let conv = Conv2dConfig::new(channels, [kernel, kernel])
                        .with_stride([stride, stride])
                        .with_padding(PaddingConfig2d::Explicit(padding, padding, padding, padding))
                        .init(device);
                    net.convs.push(conv);
                    net.pools.push(None);
                }
                Layer::Pool(pool) => {
                    if let Some(last) = net.pools.last_mut() {
                        *last = Some(pool);
                    }
                }
                Layer::Dense { d_in, d_out } => net.dense.push(LinearConfig::new(d_in, d_out).init(device)),
            }
        }
        net
    }
}

/// Refuses what no zoo model can be: BatchNorm, fewer than two classes, a hidden width for a
/// model without one.
fn check_spec(spec: ModelSpec, classes: usize) -> Result<()> {
    if spec.normalization == Normalization::Batch {
        return Err(EngineError::Unsupported(
            "BatchNorm has no DP implementation (it mixes the examples of a batch, so per-example \
             gradients and their clipping are undefined); use GroupNorm (dp_engine::nn::GroupNorm), which \
             normalises each example on its own, or --normalization none"
                .into(),
        ));
    }
    if classes < 2 {
        return Err(EngineError::invalid("classes", format!("{classes}: a classifier needs at least 2")));
    }
    if spec.hidden.is_some() && spec.name != ModelName::Mlp {
        return Err(EngineError::invalid(
            "hidden",
            format!("only the mlp model has a hidden width, not {}", spec.name.as_str()),
        ));
    }
    Ok(())
}

/// What `spec` for inputs of `input` shape and `classes` outputs needs in memory, from its
/// shapes alone (nothing is allocated).
pub fn footprint(spec: ModelSpec, input: [usize; 3], classes: usize) -> Result<Footprint> {
    check_spec(spec, classes)?;
    match spec.name {
        ModelName::Wrn16x4 => Ok(wide_resnet::footprint(input, classes)),
        _ => Ok(conv_net(spec, input, classes)?.footprint),
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
) -> Result<ZooModel> {
    check_spec(spec, classes)?;
    Ok(match spec.name {
        ModelName::Wrn16x4 => ZooModel::Wide(seeded(WideResNet::new(input[0], classes, spec.activation, device), rng)),
        _ => ZooModel::Conv(seeded(conv_net(spec, input, classes)?.build(spec.activation, device), rng)),
    })
}

/// The plan of a convolutions-then-dense-layers architecture.
fn conv_net(spec: ModelSpec, input: [usize; 3], classes: usize) -> Result<Builder> {
    let mut b = Builder { layers: Vec::new(), shape: Shape::Image(input), footprint: Footprint::of_input(input) };
    match spec.name {
        ModelName::MnistCnn => {
            b.conv(16, 8, 2, 3)?.pool(2, 1)?.conv(32, 4, 2, 0)?.pool(2, 1)?.dense(32)?.dense(classes)?;
        }
        ModelName::XiangMnist => {
            b.conv(32, 5, 1, 2)?.pool(2, 2)?.conv(64, 5, 1, 2)?.pool(2, 2)?.dense(128)?.dense(classes)?;
        }
        ModelName::Cifar10Cnn => {
            for channels in [32, 64, 128] {
                b.conv(channels, 3, 1, 1)?.conv(channels, 3, 1, 1)?.pool(2, 2)?;
            }
            b.dense(128)?.dense(128)?.dense(classes)?;
        }
        ModelName::Logreg => {
            b.dense(classes)?;
        }
        ModelName::Mlp => {
            let hidden = spec.hidden.unwrap_or_else(|| input.iter().product());
            if hidden == 0 {
                return Err(EngineError::invalid("hidden", "the hidden layer needs at least one unit"));
            }
            b.dense(hidden)?.dense(classes)?;
        }
        ModelName::Wrn16x4 => return Err(EngineError::Unsupported("wrn-16-4 is a residual network".into())),
        ModelName::ScatnetLinear => {
            b.standardize(SCATTERING_GROUPS)?.dense(classes)?;
        }
        ModelName::ScatnetCnn if input[1] <= 7 => {
            b.standardize(SCATTERING_GROUPS)?.conv(16, 3, 2, 1)?.conv(32, 3, 1, 1)?.dense(32)?.dense(classes)?;
        }
        ModelName::ScatnetCnn => {
            b.standardize(SCATTERING_GROUPS)?.conv(64, 3, 1, 1)?.pool(2, 2)?.conv(64, 3, 1, 1)?.dense(classes)?;
        }
    }
    Ok(b)
}
