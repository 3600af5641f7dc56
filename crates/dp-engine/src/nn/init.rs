//! Seeded parameter initialisation: PyTorch's default for Linear and Conv2d (uniform in
//! +-1/sqrt(fan_in) for weights and biases), drawn on the host from ChaCha20 in the module's
//! visiting order, so that a `--seed` run starts from the same model on every backend (Burn's
//! own initialisers draw from the backend's generator).

use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::{Tensor, TensorData};
use rand::Rng;
use rand_chacha::ChaCha20Rng;

/// Redraws the weights and biases of every Linear and Conv2d.
struct Seeded<'a> {
    rng: &'a mut ChaCha20Rng,
    holders: Vec<String>,
    fan_in: usize,
}

impl ModuleMapper for Seeded<'_> {
    fn enter_module(&mut self, _name: &str, container_type: &str) {
        self.holders.push(container_type.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.holders.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let holder = self.holders.last().map_or("", String::as_str);
        if !matches!(holder, "Struct:Linear" | "Struct:Conv2d") {
            return param;
        }
        let shape = param.lazy_shape().dims::<D>();
        // The weight comes first: a Linear's is [in, out], a Conv2d's [out, in, kh, kw].
        match D {
            2 => self.fan_in = shape[0],
            4 => self.fan_in = shape[1..].iter().product(),
            _ => {}
        }
        let bound = 1.0 / (self.fan_in.max(1) as f32).sqrt();
        let values: Vec<f32> =
            (0..shape.iter().product::<usize>()).map(|_| self.rng.random_range(-bound..bound)).collect();
        param.map(|t| Tensor::from_data(TensorData::new(values, shape), &t.device()))
    }
}

/// `model` with its DP dense and convolution layers redrawn from `rng`.
pub fn seeded<M: Module>(model: M, rng: &mut ChaCha20Rng) -> M {
    model.map(&mut Seeded { rng, holders: Vec::new(), fan_in: 1 })
}
