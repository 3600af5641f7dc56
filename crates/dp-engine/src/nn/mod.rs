//! DP layers as Burn modules. Each mirrors the burn-nn layer of the same name (same parameter
//! names, shapes and records) and, while a forward pass is recorded (`grad_sample::tape`), keeps
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
pub mod scatter_net;

pub use conv2d::{DpConv2d, DpConv2dConfig};
pub use embedding::{DpEmbedding, DpEmbeddingConfig};
pub use group_norm::{DpGroupNorm, DpGroupNormConfig};
pub use layer_norm::{DpLayerNorm, DpLayerNormConfig};
pub use linear::{DpLinear, DpLinearConfig};
