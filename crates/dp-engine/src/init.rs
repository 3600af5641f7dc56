//! Parameter initialisation, PyTorch's default for Linear and Conv2d (uniform in
//! +-1/sqrt(fan_in) for weights and biases), drawn on the host from ChaCha20 so that a `--seed`
//! run starts from the same model on every backend.

use crate::tensor_io::matrix;
use burn::tensor::{Device, Tensor};
use rand::Rng;
use rand_chacha::ChaCha20Rng;

/// A [rows, cols] tensor uniform in (-1/sqrt(fan_in), 1/sqrt(fan_in)).
pub fn uniform_fan_in(rng: &mut ChaCha20Rng, shape: [usize; 2], fan_in: usize, device: &Device) -> Tensor<2> {
    let bound = 1.0 / (fan_in as f32).sqrt();
    let values = (0..shape[0] * shape[1]).map(|_| rng.random_range(-bound..bound)).collect();
    matrix(values, shape, device)
}
