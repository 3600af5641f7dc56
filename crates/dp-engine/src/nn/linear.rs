//! The DP dense layer: z = x W + b over the last dimension of x [B, ..., d_input], W stored
//! [d_input, d_output] as in burn-nn. Per-example gradients: `grad_sample::affine` (rank one on
//! flat inputs, ghost norm or materialised on sequences).

use crate::grad_sample::affine::{AffineGrads, WeightLayout};
use crate::grad_sample::tape::{Finish, observe};
use burn::config::Config;
use burn::module::{Initializer, Module, Param};
use burn::tensor::module::linear;
use burn::tensor::{Device, Tensor};

/// Configuration of a [`Linear`].
#[derive(Config, Debug)]
pub struct LinearConfig {
    /// Input features.
    pub d_input: usize,
    /// Output features.
    pub d_output: usize,
    /// Whether the layer has a bias.
    #[config(default = true)]
    pub bias: bool,
    /// Initialiser of weight and bias (default: PyTorch's, uniform in +-1/sqrt(d_input)).
    #[config(default = "Initializer::KaimingUniform{gain:1.0/3.0f64.sqrt(), fan_out_only:false}")]
    pub initializer: Initializer,
}

/// A dense layer with per-example gradients.
#[derive(Module, Debug)]
pub struct Linear {
    /// Weight [d_input, d_output].
    pub weight: Param<Tensor<2>>,
    /// Bias `[d_output]`.
    pub bias: Option<Param<Tensor<1>>>,
}

impl LinearConfig {
    /// A layer on `device`.
    pub fn init(&self, device: &Device) -> Linear {
        let (i, o) = (self.d_input, self.d_output);
        let weight = self.initializer.init_with([i, o], Some(i), Some(o), device);
        let bias = self.bias.then(|| self.initializer.init_with([o], Some(i), Some(o), device));
        Linear { weight, bias }
    }
}

impl From<burn::nn::Linear> for Linear {
    fn from(layer: burn::nn::Linear) -> Self {
        Linear { weight: layer.weight, bias: layer.bias }
    }
}

impl Linear {
    /// z = x W + b for x [B, ..., d_input].
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let z = linear(x.clone(), self.weight.val(), self.bias.as_ref().map(|b| b.val()));
        let (weight, bias) = (self.weight.id, self.bias.as_ref().map(|b| b.id));
        let ids: Vec<_> = std::iter::once(weight).chain(bias).collect();
        observe("Linear", &ids, z, || -> Finish {
            let dims = x.dims();
            let (b, k) = (dims[0], dims[D - 1]);
            let positions = dims.iter().product::<usize>() / (b * k).max(1);
            let a = x.inner().reshape([b, positions, k]).swap_dims(1, 2);
            Box::new(move |g: Tensor<2>| {
                let n = g.dims()[1] / positions.max(1);
                let g = g.reshape([b, positions, n]).swap_dims(1, 2);
                Box::new(AffineGrads::new(a, g, weight, WeightLayout::InputMajor, bias))
            })
        })
    }
}
