//! `wrn-16-4`: the wide residual network of De et al. 2022 ("Unlocking high-accuracy
//! differentially private image classification through scale"), depth 16 and width 4: a 3x3 stem
//! of 16 channels, three groups of two pre-activation residual blocks of 64, 128 and 256 channels
//! (the second and third groups start with stride 2), GroupNorm with 16 groups in place of
//! BatchNorm, weight-standardised convolutions (their per-example gradients go through the
//! standardisation's Jacobian: `grad_sample::affine`), a final GroupNorm, global average pooling
//! and a dense head. A 1x1 standardised convolution carries the shortcut where the shape changes.

use super::Footprint;
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use dp_engine::lots::ImageClassifier;
use dp_engine::nn::activation::Activation;
use dp_engine::nn::{Conv2d, Conv2dConfig, GroupNorm, GroupNormConfig, Linear, LinearConfig, PaddingConfig2d};

/// GroupNorm's groups (De et al.).
const GROUPS: usize = 16;
/// Channels of the stem.
const STEM: usize = 16;
/// Blocks per group: (depth - 4) / 6 for depth 16.
const BLOCKS: usize = 2;
/// Channel multiplier.
const WIDTH: usize = 4;

/// A weight-standardised convolution without bias, k x k, padding k / 2.
fn conv(c_in: usize, c_out: usize, kernel: usize, stride: usize, device: &Device) -> Conv2d {
    Conv2dConfig::new([c_in, c_out], [kernel, kernel])
        .with_stride([stride, stride])
        .with_padding(PaddingConfig2d::Explicit(kernel / 2, kernel / 2, kernel / 2, kernel / 2))
        .with_bias(false)
        .with_standardize(true)
        .init(device)
}

/// GroupNorm -> activation -> conv -> GroupNorm -> activation -> conv, plus the shortcut.
#[derive(Module, Debug)]
pub struct WideBlock {
    norm1: GroupNorm,
    conv1: Conv2d,
    norm2: GroupNorm,
    conv2: Conv2d,
    /// A 1x1 convolution of the normalised input where channels or resolution change.
    shortcut: Option<Conv2d>,
}

impl WideBlock {
    fn new(c_in: usize, c_out: usize, stride: usize, device: &Device) -> Self {
        Self {
            norm1: GroupNormConfig::new(GROUPS, c_in).init(device),
            conv1: conv(c_in, c_out, 3, stride, device),
            norm2: GroupNormConfig::new(GROUPS, c_out).init(device),
            conv2: conv(c_out, c_out, 3, 1, device),
            shortcut: (c_in != c_out || stride != 1).then(|| conv(c_in, c_out, 1, stride, device)),
        }
    }

    fn forward(&self, x: Tensor<4>, activation: Activation) -> Tensor<4> {
        let o = activation.apply(self.norm1.forward(x.clone()));
        let skip = match &self.shortcut {
            Some(s) => s.forward(o.clone()),
            None => x,
        };
        let h = activation.apply(self.norm2.forward(self.conv1.forward(o)));
        self.conv2.forward(h) + skip
    }
}

/// What WRN-16-4 needs for inputs of `input` shape and `classes` outputs (see [`Footprint`]):
/// the same layers as [`WideResNet::new`], counted instead of built.
pub fn footprint(input: [usize; 3], classes: usize) -> Footprint {
    let [channels, h, w] = input;
    let out = |n: usize, stride: usize| (n - 1) / stride + 1;
    let mut f = Footprint::of_input(input);
    let conv = |f: &mut Footprint, c_in: usize, c_out: usize, k: usize, plane: [usize; 2]| {
        f.params += (c_in * c_out * k * k) as u128;
        f.add_conv(c_in, c_out, k, plane);
    };
    // Each GroupNorm: gamma and beta, its output and the activation after it.
    let norm = |f: &mut Footprint, c: usize, plane: [usize; 2]| {
        f.params += 2 * c as u128;
        f.add_activations(2 * c * plane[0] * plane[1]);
    };
    let mut plane = [h, w];
    conv(&mut f, channels, STEM, 3, plane);
    let mut c_in = STEM;
    for (group, stride) in [1, 2, 2].into_iter().enumerate() {
        let c_out = (STEM * WIDTH) << group;
        for b in 0..BLOCKS {
            let stride = if b == 0 { stride } else { 1 };
            let next = [out(plane[0], stride), out(plane[1], stride)];
            norm(&mut f, c_in, plane);
            conv(&mut f, c_in, c_out, 3, next);
            norm(&mut f, c_out, next);
            conv(&mut f, c_out, c_out, 3, next);
            if c_in != c_out || stride != 1 {
                conv(&mut f, c_in, c_out, 1, next);
            }
            (plane, c_in) = (next, c_out);
        }
    }
    norm(&mut f, c_in, plane);
    f.params += ((c_in + 1) * classes) as u128;
    f.add_activations(c_in + classes);
    f
}

/// WRN-16-4 with GroupNorm and weight standardisation.
#[derive(Module, Debug)]
pub struct WideResNet {
    stem: Conv2d,
    blocks: Vec<WideBlock>,
    norm: GroupNorm,
    head: Linear,
    #[module(skip)]
    activation: Activation,
}

impl WideResNet {
    /// The network for images of `channels` channels and `classes` classes.
    pub fn new(channels: usize, classes: usize, activation: Activation, device: &Device) -> Self {
        let mut blocks = Vec::new();
        let mut c_in = STEM;
        for (group, stride) in [1, 2, 2].into_iter().enumerate() {
            let c_out = (STEM * WIDTH) << group;
            for b in 0..BLOCKS {
                blocks.push(WideBlock::new(c_in, c_out, if b == 0 { stride } else { 1 }, device));
                c_in = c_out;
            }
        }
        Self {
            stem: conv(channels, STEM, 3, 1, device),
            blocks,
            norm: GroupNormConfig::new(GROUPS, c_in).init(device),
            head: LinearConfig::new(c_in, classes).init(device),
            activation,
        }
    }
}

impl ImageClassifier for WideResNet {
    fn logits(&self, x: Tensor<4>) -> Tensor<2> {
        let mut h = self.stem.forward(x);
        for block in &self.blocks {
            h = block.forward(h, self.activation);
        }
        let h = self.activation.apply(self.norm.forward(h));
        let [b, c, _, _] = h.dims();
        self.head.forward(h.mean_dim(3).mean_dim(2).reshape([b, c]))
    }
}
