//! DP layers as Burn modules, drop-ins for burn-nn's: each has the burn-nn layer's name, its
//! config's name, fields and builder methods, and its parameter names, shapes and records, so a
//! burn-nn model becomes private by taking these names from here instead of `burn::nn`. Max
//! pooling, ReLU and tanh have their burn-nn names here too, on the engine's faster passes
//! (burn-nn's work as well, slower on the CPU); dropout and the rest stay burn-nn's. Each, while a forward pass is recorded (`grad_sample::tape`), keeps
//! what its per-example gradients need. A user's model is an ordinary `#[derive(Module)]` struct
//! built from these and parameter-free modules, with any forward graph (residual adds,
//! concatenation, activations, pooling, dropout, reshapes).
//!
//! The set is open: a layer of a user's own has per-example gradients when its forward pass
//! returns its output through `grad_sample::tape::observe`, with its parameters' ids and a
//! closure that turns what it kept (its input, detached) and dL/dz [B, rest] into a
//! `grad_sample::PerExampleGrads` (per-example squared norms and weighted sums); the built-in
//! layers do exactly that (docs/ARCHITECTURE.md, "Adding a layer").

pub mod activation;
pub mod conv2d;
pub mod embedding;
pub mod group_norm;
pub mod init;
pub mod layer_norm;
pub mod linear;
pub mod pool;
pub mod scatter_net;

pub use activation::{Relu, Tanh};
/// burn-nn's padding, re-exported beside the convolution that takes it.
pub use burn::nn::PaddingConfig2d;
pub use conv2d::{Conv2d, Conv2dConfig};
pub use embedding::{Embedding, EmbeddingConfig};
pub use group_norm::{GroupNorm, GroupNormConfig};
pub use layer_norm::{LayerNorm, LayerNormConfig};
pub use linear::{Linear, LinearConfig};
pub use pool::{MaxPool2d, MaxPool2dConfig};
