//! The DP embedding table: token ids [B, T] to vectors [B, T, d], weight [V, d] as in burn-nn.
//! Per-example gradients: `grad_sample::embedding` (masked Gram ghost norm, scatter-add sum).

use crate::grad_sample::embedding::EmbeddingGrads;
use crate::grad_sample::tape::{Finish, observe};
use burn::config::Config;
use burn::module::{Initializer, Module, Param};
use burn::tensor::module::embedding;
use burn::tensor::{Device, Int, Tensor};

/// Configuration of a [`Embedding`].
#[derive(Config, Debug)]
pub struct EmbeddingConfig {
    /// Rows of the table (vocabulary size).
    pub n_embedding: usize,
    /// Width of each vector.
    pub d_model: usize,
    /// Initialiser (default: standard normal, as PyTorch's).
    #[config(default = "Initializer::Normal{mean:0.0, std:1.0}")]
    pub initializer: Initializer,
}

/// An embedding table with per-example gradients.
#[derive(Module, Debug)]
pub struct Embedding {
    /// The table [V, d].
    pub weight: Param<Tensor<2>>,
}

impl EmbeddingConfig {
    /// A table on `device`.
    pub fn init(&self, device: &Device) -> Embedding {
        Embedding { weight: self.initializer.init([self.n_embedding, self.d_model], device) }
    }
}

impl From<burn::nn::Embedding> for Embedding {
    fn from(layer: burn::nn::Embedding) -> Self {
        Embedding { weight: layer.weight }
    }
}

impl Embedding {
    /// The vectors of tokens [B, T], [B, T, d].
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        let z = embedding(self.weight.val(), tokens.clone());
        let weight = self.weight.id;
        let [rows, d] = self.weight.lazy_shape().dims();
        observe("Embedding", &[weight], z, || -> Finish {
            Box::new(move |g: Tensor<2>| {
                let [b, t] = tokens.dims();
                Box::new(EmbeddingGrads::new(tokens, g.reshape([b, t, d]), rows, weight))
            })
        })
    }
}
