//! burn-nn's `MaxPool2d` and its config, under their names and with their fields, on the
//! engine's pooling (`ops::pool`): a square window at a square stride without padding or
//! dilation (what CNNs pool with) is one parallel pass on flex, where burn-nn's, through flex's
//! general pooling, ran about ten times longer and most of a small CNN's step. Any other geometry
//! is burn-nn's own module. A burn-nn model takes these from here as it
//! takes the DP layers.

use crate::ops::pool::MaxPool;
use burn::config::Config;
use burn::module::Module;
use burn::nn::PaddingConfig2d;
use burn::tensor::Tensor;

/// burn-nn's `MaxPool2dConfig`.
#[derive(Debug, Config)]
pub struct MaxPool2dConfig {
    /// The window's size.
    pub kernel_size: [usize; 2],
    /// The strides (the window's size by default).
    #[config(default = "kernel_size")]
    pub strides: [usize; 2],
    /// The padding.
    #[config(default = "PaddingConfig2d::Valid")]
    pub padding: PaddingConfig2d,
    /// The dilation.
    #[config(default = "[1, 1]")]
    pub dilation: [usize; 2],
    /// Whether the output's size rounds up.
    #[config(default = "false")]
    pub ceil_mode: bool,
}

/// burn-nn's `MaxPool2d`, parameter-free.
#[derive(Module, Debug)]
pub struct MaxPool2d {
    /// The strides.
    pub stride: [usize; 2],
    /// The window's size.
    pub kernel_size: [usize; 2],
    /// The padding.
    #[module(skip)]
    pub padding: PaddingConfig2d,
    /// The dilation.
    pub dilation: [usize; 2],
    /// Whether the output's size rounds up.
    pub ceil_mode: bool,
}

impl MaxPool2dConfig {
    /// The module.
    pub fn init(&self) -> MaxPool2d {
        MaxPool2d {
            stride: self.strides,
            kernel_size: self.kernel_size,
            padding: self.padding.clone(),
            dilation: self.dilation,
            ceil_mode: self.ceil_mode,
        }
    }
}

impl MaxPool2d {
    /// Pools each channel of x [B, C, H, W].
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let [k, kw] = self.kernel_size;
        let [s, sw] = self.stride;
        let plain = matches!(self.padding, PaddingConfig2d::Valid) && self.dilation == [1, 1] && !self.ceil_mode;
        if plain && k == kw && s == sw {
            return MaxPool { kernel: k, stride: s }.apply(x);
        }
        let burn_nn = burn::nn::pool::MaxPool2dConfig::new(self.kernel_size)
            .with_strides(self.stride)
            .with_padding(self.padding.clone())
            .with_dilation(self.dilation)
            .with_ceil_mode(self.ceil_mode);
        burn_nn.init().forward(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

    /// Every geometry pools as burn-nn's own module does: the engine's pass where it applies,
    /// Burn's elsewhere.
    #[test]
    fn pools_as_burn_nn_does() {
        let device = crate::backend::cpu().device;
        let values: Vec<f32> = (0..2 * 3 * 9 * 9).map(|i| ((i * 37 % 101) as f32).sin()).collect();
        let x = || Tensor::<4>::from_data(TensorData::new(values.clone(), [2, 3, 9, 9]), &device);
        let configs = [
            ([2, 2], [2, 2], PaddingConfig2d::Valid, false),
            ([3, 3], [2, 2], PaddingConfig2d::Valid, false),
            ([3, 3], [1, 1], PaddingConfig2d::Same, false),
            ([2, 3], [1, 2], PaddingConfig2d::Valid, false),
            ([2, 2], [2, 2], PaddingConfig2d::Valid, true),
        ];
        for (kernel, strides, padding, ceil) in configs {
            let ours =
                MaxPool2dConfig::new(kernel).with_strides(strides).with_padding(padding.clone()).with_ceil_mode(ceil);
            let theirs = burn::nn::pool::MaxPool2dConfig::new(kernel)
                .with_strides(strides)
                .with_padding(padding)
                .with_ceil_mode(ceil);
            let got = ours.init().forward(x()).into_data();
            let want = theirs.init().forward(x()).into_data();
            assert_eq!(got, want, "{kernel:?} {strides:?} ceil {ceil}");
        }
    }
}
