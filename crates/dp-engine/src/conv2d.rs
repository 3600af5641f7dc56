//! The DP 2-D convolution: square kernel, stride, symmetric zero padding, no groups. The weight is
//! stored [Cout, Cin*k*k], the layout of one example's gradient g_b U_b^T.

use crate::init::uniform_fan_in;
use crate::per_example::{ConvNormMethod, PerExampleGrad};
use crate::tape::{LayerIo, Recorded, Tape};
use burn::tensor::ops::PadMode;
use burn::tensor::{Device, Slice, Tensor};
use rand_chacha::ChaCha20Rng;

/// Shape of a convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvShape {
    /// Input channels.
    pub in_channels: usize,
    /// Output channels.
    pub out_channels: usize,
    /// Kernel height and width.
    pub kernel: usize,
    /// Stride in both directions.
    pub stride: usize,
    /// Zero padding on every side.
    pub padding: usize,
}

impl ConvShape {
    /// Output height or width for an input of `size`.
    pub fn output_size(&self, size: usize) -> usize {
        (size + 2 * self.padding - self.kernel) / self.stride + 1
    }

    /// Cin * k * k: the length of one unfolded patch.
    pub fn patch(&self) -> usize {
        self.in_channels * self.kernel * self.kernel
    }
}

/// A convolution whose per-example gradient norms come from unfold (materialised or ghost).
#[derive(Debug, Clone)]
pub struct DpConv2d {
    /// The convolution's shape.
    pub shape: ConvShape,
    /// Weight [Cout, Cin*k*k].
    pub weight: Tensor<2>,
    /// Bias [1, Cout].
    pub bias: Tensor<2>,
}

impl DpConv2d {
    /// A convolution initialised from `rng`.
    pub fn new(shape: ConvShape, rng: &mut ChaCha20Rng, device: &Device) -> Self {
        let fan_in = shape.patch();
        Self {
            shape,
            weight: uniform_fan_in(rng, [shape.out_channels, fan_in], fan_in, device),
            bias: uniform_fan_in(rng, [1, shape.out_channels], fan_in, device),
        }
    }

    /// Unfolds `x` [B, Cin, H, W] into patches [B, Cin*k*k, P] (im2col, Burn's unfold order) with
    /// strided slices, so that autodiff differentiates it cheaply (burn-ndarray's own conv backward
    /// is an order of magnitude slower than this plus a GEMM).
    fn im2col(&self, x: Tensor<4>) -> Tensor<3> {
        let ConvShape { kernel: k, stride: s, padding: p, .. } = self.shape;
        let [b, c, h, w] = x.dims();
        let (ho, wo) = (self.shape.output_size(h), self.shape.output_size(w));
        let x = if p > 0 { x.pad([(0, 0), (0, 0), (p, p), (p, p)], PadMode::Constant(0.0)) } else { x };
        let window =
            |start: usize, n: usize| Slice::new(start as isize, Some((start + s * (n - 1) + 1) as isize), s as isize);
        let shifted: Vec<Tensor<4>> = (0..k * k)
            .map(|i| x.clone().slice([Slice::full(), Slice::full(), window(i / k, ho), window(i % k, wo)]))
            .collect();
        Tensor::stack::<5>(shifted, 2).reshape([b, c * k * k, ho * wo])
    }

    /// z = conv(x, W) + b as one GEMM over the patches; with a tape, records the patches (what the
    /// per-example gradients need) and adds the probe.
    pub fn forward(&self, x: Tensor<4>, tape: Option<&mut Tape>) -> Tensor<4> {
        let s = self.shape;
        let [b, _, h, w] = x.dims();
        let cols = self.im2col(x);
        let weight = self.weight.clone().unsqueeze_dim::<3>(0).expand([b, s.out_channels, s.patch()]);
        let z = weight.matmul(cols.clone()) + self.bias.clone().reshape([1, s.out_channels, 1]);
        let dims = [b, s.out_channels, s.output_size(h), s.output_size(w)];
        match tape {
            Some(tape) => tape.record(Recorded::Patches(cols), z).reshape(dims),
            None => z.reshape(dims),
        }
    }

    /// The per-example gradient operands from this layer's tape record.
    pub fn per_example(&self, io: LayerIo) -> PerExampleGrad {
        let Recorded::Patches(cols) = io.input else { unreachable!("a convolution records its patches") };
        let [b, _, positions] = cols.dims();
        let grad = io.output_grad.reshape([b, self.shape.out_channels, positions]);
        let method = ConvNormMethod::cheaper(positions, self.shape.out_channels, self.shape.patch());
        PerExampleGrad::Conv { cols, grad, method, materialized: None }
    }
}
