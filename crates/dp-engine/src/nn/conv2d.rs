//! The DP 2-D convolution (stride, symmetric zero padding, dilation, no groups), weight
//! [C_out, C_in, kh, kw], configured as burn-nn's `Conv2dConfig` is (a drop-in: the same name,
//! fields and builder methods). The forward pass is the backend's convolution (or one
//! GEMM over the patches where the input carries no gradient); while a DP step records, the
//! unfolded input patches (the im2col kernel, outside autodiff) are kept for the per-example
//! gradients (`grad_sample::affine`: ghost norm or materialised, whichever is cheaper).

use crate::error::EngineError;
use crate::grad_sample::affine::{AffineGrads, WeightLayout};
use crate::grad_sample::layer_input::LayerInput;
use crate::grad_sample::tape::{Finish, observe};
use crate::host::kernel_log::{Kernel, Layer, Pass, note};
use crate::ops::conv::conv2d;
use burn::config::Config;
use burn::module::{Initializer, Module, Param};
use burn::nn::PaddingConfig2d;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Device, Tensor};
use dp_kernels::{Patches, im2col};

/// Configuration of a [`Conv2d`].
#[derive(Config, Debug)]
pub struct Conv2dConfig {
    /// Input and output channels.
    pub channels: [usize; 2],
    /// Kernel height and width.
    pub kernel_size: [usize; 2],
    /// Stride (rows, columns).
    #[config(default = "[1, 1]")]
    pub stride: [usize; 2],
    /// Spacing between kernel elements.
    #[config(default = "[1, 1]")]
    pub dilation: [usize; 2],
    /// Connections between input and output channels, as in burn-nn: only 1 has per-example
    /// gradients here.
    #[config(default = "1")]
    pub groups: usize,
    /// Zero padding, as in burn-nn: `Valid`, `Explicit` with the same amount on opposite sides,
    /// or `Same` at stride and dilation 1 with an odd kernel.
    #[config(default = "PaddingConfig2d::Valid")]
    pub padding: PaddingConfig2d,
    /// Whether the layer has a bias.
    #[config(default = true)]
    pub bias: bool,
    /// Weight standardisation (Qiao et al. 2019; De et al. 2022 for DP): the convolution uses
    /// each output channel's weights standardised to mean 0 and variance 1.
    #[config(default = false)]
    pub standardize: bool,
    /// Initialiser (default: PyTorch's, uniform in +-1/sqrt(fan_in)).
    #[config(default = "Initializer::KaimingUniform{gain:1.0/3.0f64.sqrt(), fan_out_only:false}")]
    pub initializer: Initializer,
}

/// A convolution with per-example gradients.
#[derive(Module, Debug)]
pub struct Conv2d {
    /// Weight [C_out, C_in, kh, kw].
    pub weight: Param<Tensor<4>>,
    /// Bias `[C_out]`.
    pub bias: Option<Param<Tensor<1>>>,
    /// Stride.
    pub stride: [usize; 2],
    /// Zero padding on both sides.
    pub padding: [usize; 2],
    /// Dilation.
    pub dilation: [usize; 2],
    /// Whether the weight is standardised per output channel before use.
    pub standardize: bool,
}

/// Added to each output channel's weight variance before its square root.
const STANDARDIZATION_EPSILON: f64 = 1e-5;

impl Conv2dConfig {
    /// A convolution on `device`.
    ///
    /// # Panics
    ///
    /// Where burn-nn's would not (as burn-nn's panics on a configuration it cannot build): for
    /// `groups` other than 1 and padding that is not the same on opposite sides, which have no
    /// per-example gradients here ([`Conv2dConfig::try_init`] says so as an error instead).
    pub fn init(&self, device: &Device) -> Conv2d {
        self.try_init(device).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A convolution on `device`, or why this configuration has no DP counterpart.
    pub fn try_init(&self, device: &Device) -> Result<Conv2d, EngineError> {
        let padding = symmetric_padding(self.groups, &self.padding, self.kernel_size, self.stride, self.dilation)?;
        let [c_in, c_out] = self.channels;
        let [kh, kw] = self.kernel_size;
        let (fan_in, fan_out) = (c_in * kh * kw, c_out * kh * kw);
        let weight = self.initializer.init_with([c_out, c_in, kh, kw], Some(fan_in), Some(fan_out), device);
        let bias = self.bias.then(|| self.initializer.init_with([c_out], Some(fan_in), Some(fan_out), device));
        Ok(Conv2d {
            weight,
            bias,
            stride: self.stride,
            padding,
            dilation: self.dilation,
            standardize: self.standardize,
        })
    }
}

/// The zero padding on both sides (rows, columns) of a convolution configured as burn-nn's, or
/// why it has no DP counterpart here: groups, padding that differs between opposite sides, and
/// `Same` where it would (an even kernel, a stride or dilation other than 1).
fn symmetric_padding(
    groups: usize,
    padding: &PaddingConfig2d,
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
) -> Result<[usize; 2], EngineError> {
    let refuse = |what: String| {
        Err(EngineError::Unsupported(format!(
            "a Conv2d with {what} has no DP counterpart: give a layer of your own per-example gradients through dp_engine::grad_sample::tape::observe"
        )))
    };
    if groups != 1 {
        return refuse(format!("{groups} groups"));
    }
    match *padding {
        PaddingConfig2d::Valid => Ok([0, 0]),
        PaddingConfig2d::Explicit(top, left, bottom, right) if top == bottom && left == right => Ok([top, left]),
        PaddingConfig2d::Explicit(..) => refuse("asymmetric padding".into()),
        PaddingConfig2d::Same if stride == [1, 1] && dilation == [1, 1] && kernel.iter().all(|k| k % 2 == 1) => {
            Ok(kernel.map(|k| k / 2))
        }
        PaddingConfig2d::Same => {
            refuse("`Same` padding of an even kernel or at a stride or dilation above 1 (give it explicitly)".into())
        }
    }
}

impl TryFrom<burn::nn::conv::Conv2d> for Conv2d {
    type Error = EngineError;

    /// The same parameters (and records): a burn-nn convolution fine-tuned with per-example
    /// gradients. Grouped convolutions and asymmetric padding have no DP counterpart.
    fn try_from(layer: burn::nn::conv::Conv2d) -> Result<Self, EngineError> {
        let padding = symmetric_padding(layer.groups, &layer.padding, layer.kernel_size, layer.stride, layer.dilation)?;
        Ok(Conv2d {
            weight: layer.weight,
            bias: layer.bias,
            stride: layer.stride,
            padding,
            dilation: layer.dilation,
            standardize: false,
        })
    }
}

impl Conv2d {
    /// The geometry of this convolution's patches for a `kernel`.
    fn patches(&self, kernel: [usize; 2]) -> Patches {
        Patches { kernel, stride: self.stride, padding: self.padding, dilation: self.dilation }
    }

    /// Output height and width for an input of `size` [H, W].
    pub fn output_size(&self, size: [usize; 2]) -> [usize; 2] {
        let [_, _, kh, kw] = self.weight.lazy_shape().dims();
        self.patches([kh, kw]).output_size(size)
    }

    /// The convolution of x [B, C_in, H, W], [B, C_out, H', W']. When x carries no gradient (the
    /// first layer), one GEMM over its patches, which the tape keeps; otherwise the backend's
    /// convolution (on the CPU one GEMM per example over its patches, `ops::conv`; autotuned
    /// kernels on wgpu), with the patches computed outside autodiff only while a DP step records.
    /// The patches come from the im2col kernel (`dp_kernels::im2col`).
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let [c_out, c_in, kh, kw] = self.weight.lazy_shape().dims();
        let k = c_in * kh * kw;
        let flat = self.weight.val().reshape([c_out, k]);
        // Standardised: W^ = (W - mean) / s per output row, and 1 / s for the tape.
        let (used, standardization) = if self.standardize {
            let centered = flat.clone() - flat.mean_dim(1);
            let inv_std = centered.clone().square().mean_dim(1).add_scalar(STANDARDIZATION_EPSILON).sqrt().recip();
            let w_hat = centered * inv_std.clone();
            (w_hat.clone(), Some((w_hat.inner(), inv_std.inner())))
        } else {
            (flat, None)
        };
        let [b, _, h, w] = x.dims();
        let patches = self.patches([kh, kw]);
        let [ho, wo] = patches.output_size([h, w]);
        let unfold = |x: Tensor<4>| im2col(x.inner(), &patches).unwrap_or_else(|e| panic!("im2col: {e}"));
        // The output before the bias: a standardised layer's norms need it (W^ a per position).
        let layer = Layer::conv([b, c_in, h, w], c_out, patches);
        let (z, cols) = if x.is_tracked() {
            let options = ConvOptions::new(self.stride, self.padding, self.dilation, 1);
            (conv2d(x.clone(), used.reshape([c_out, c_in, kh, kw]), options), None)
        } else {
            note(&layer, Pass::Forward, Kernel::Im2colTensor);
            if used.is_tracked() {
                // Burn's autodiff of the matmul (a plain step's parameters carry gradients).
                note(&layer, Pass::WeightGradient, Kernel::Im2colTensor);
            }
            let cols = unfold(x.clone());
            let z = used.reshape([1, c_out, k]).expand([b, c_out, k]).matmul(cols.clone());
            (z.reshape([b, c_out, ho, wo]), Some(cols))
        };
        let projection = z.clone();
        let z = match &self.bias {
            Some(bias) => z + bias.val().reshape([1, c_out, 1, 1]),
            None => z,
        };
        let (weight, bias) = (self.weight.id, self.bias.as_ref().map(|b| b.id));
        let ids: Vec<_> = std::iter::once(weight).chain(bias).collect();
        observe("Conv2d", &ids, z, || -> Finish {
            // The patches the forward pass multiplied, or x's, unfolded where they are read.
            let a = match cols {
                Some(cols) => cols.into(),
                None => LayerInput::patches(x.inner(), patches),
            };
            Box::new(move |g: Tensor<2>| {
                let positions = g.dims()[1] / c_out;
                let grads =
                    AffineGrads::new(a, g.reshape([b, c_out, positions]), weight, WeightLayout::OutputMajor, bias)
                        .named(layer);
                Box::new(match standardization {
                    Some((w_hat, inv_std)) => {
                        grads.standardized(w_hat, inv_std, projection.inner().reshape([b, c_out, positions]))
                    }
                    None => grads,
                })
            })
        })
    }
}
