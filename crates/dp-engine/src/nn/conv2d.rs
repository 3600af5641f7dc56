//! The DP 2-D convolution (stride, symmetric zero padding, dilation, no groups), weight
//! [C_out, C_in, kh, kw] as in burn-nn. The forward pass is one GEMM over the unfolded input
//! patches (im2col by strided slices, which autodiff differentiates cheaply: burn-ndarray's own
//! convolution backward is an order of magnitude slower); the patches are what the per-example
//! gradients need (`grad_sample::affine`: ghost norm or materialised, whichever is cheaper).

use crate::grad_sample::affine::{AffineGrads, WeightLayout};
use crate::grad_sample::tape::{Finish, observe};
use burn::config::Config;
use burn::module::{Initializer, Module, Param};
use burn::tensor::ops::PadMode;
use burn::tensor::{Device, Slice, Tensor};

/// Configuration of a [`DpConv2d`].
#[derive(Config, Debug)]
pub struct DpConv2dConfig {
    /// Input and output channels.
    pub channels: [usize; 2],
    /// Kernel height and width.
    pub kernel_size: [usize; 2],
    /// Stride (rows, columns).
    #[config(default = "[1, 1]")]
    pub stride: [usize; 2],
    /// Zero padding on both sides (rows, columns).
    #[config(default = "[0, 0]")]
    pub padding: [usize; 2],
    /// Spacing between kernel elements.
    #[config(default = "[1, 1]")]
    pub dilation: [usize; 2],
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
pub struct DpConv2d {
    /// Weight [C_out, C_in, kh, kw].
    pub weight: Param<Tensor<4>>,
    /// Bias [C_out].
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

impl DpConv2dConfig {
    /// A convolution on `device`.
    pub fn init(&self, device: &Device) -> DpConv2d {
        let [c_in, c_out] = self.channels;
        let [kh, kw] = self.kernel_size;
        let (fan_in, fan_out) = (c_in * kh * kw, c_out * kh * kw);
        let weight = self.initializer.init_with([c_out, c_in, kh, kw], Some(fan_in), Some(fan_out), device);
        let bias = self.bias.then(|| self.initializer.init_with([c_out], Some(fan_in), Some(fan_out), device));
        DpConv2d {
            weight,
            bias,
            stride: self.stride,
            padding: self.padding,
            dilation: self.dilation,
            standardize: self.standardize,
        }
    }
}

impl DpConv2d {
    /// Output height and width for an input of `size` [H, W].
    pub fn output_size(&self, size: [usize; 2]) -> [usize; 2] {
        let [_, _, kh, kw] = self.weight.lazy_shape().dims();
        let out = |n: usize, k: usize, i: usize| {
            (n + 2 * self.padding[i]).saturating_sub(self.dilation[i] * (k - 1) + 1) / self.stride[i] + 1
        };
        [out(size[0], kh, 0), out(size[1], kw, 1)]
    }

    /// Unfolds x [B, C, H, W] into patches [B, C*kh*kw, P] in the weight's order.
    fn im2col(&self, x: Tensor<4>, kernel: [usize; 2]) -> Tensor<3> {
        let [b, c, h, w] = x.dims();
        let [ho, wo] = self.output_size([h, w]);
        let [ph, pw] = self.padding;
        let x = if ph + pw > 0 { x.pad([(0, 0), (0, 0), (ph, ph), (pw, pw)], PadMode::Constant(0.0)) } else { x };
        let window = |start: usize, n: usize, i: usize| {
            let s = self.stride[i];
            Slice::new(start as isize, Some((start + s * (n - 1) + 1) as isize), s as isize)
        };
        let [kh, kw] = kernel;
        let shifted: Vec<Tensor<4>> = (0..kh * kw)
            .map(|i| {
                let (r, col) = ((i / kw) * self.dilation[0], (i % kw) * self.dilation[1]);
                x.clone().slice([Slice::full(), Slice::full(), window(r, ho, 0), window(col, wo, 1)])
            })
            .collect();
        Tensor::stack::<5>(shifted, 2).reshape([b, c * kh * kw, ho * wo])
    }

    /// The convolution of x [B, C_in, H, W], [B, C_out, H', W'].
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let [c_out, c_in, kh, kw] = self.weight.lazy_shape().dims();
        let [b, _, h, w] = x.dims();
        let [ho, wo] = self.output_size([h, w]);
        let k = c_in * kh * kw;
        let cols = self.im2col(x, [kh, kw]);
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
        let z = used.reshape([1, c_out, k]).expand([b, c_out, k]).matmul(cols.clone());
        let z = match &self.bias {
            Some(bias) => z + bias.val().reshape([1, c_out, 1]),
            None => z,
        };
        let (weight, bias) = (self.weight.id, self.bias.as_ref().map(|b| b.id));
        let ids: Vec<_> = std::iter::once(weight).chain(bias).collect();
        let z = observe("DpConv2d", &ids, z, || -> Finish {
            let a = cols.inner();
            Box::new(move |g: Tensor<2>| {
                let positions = g.dims()[1] / c_out;
                let grads =
                    AffineGrads::new(a, g.reshape([b, c_out, positions]), weight, WeightLayout::OutputMajor, bias);
                Box::new(match standardization {
                    Some((w_hat, inv_std)) => grads.standardized(w_hat, inv_std),
                    None => grads,
                })
            })
        });
        z.reshape([b, c_out, ho, wo])
    }
}
