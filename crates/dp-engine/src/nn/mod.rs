//! DP layers as Burn modules. Each mirrors the burn-nn layer of the same name (same parameter
//! names, shapes and records) and, while a forward pass is recorded (`grad_sample::tape`), keeps
//! what its per-example gradients need. A user's model is an ordinary `#[derive(Module)]` struct
//! built from these and parameter-free modules, with any forward graph (residual adds,
//! concatenation, activations, pooling, dropout, reshapes).

pub mod conv2d;
pub mod embedding;
pub mod group_norm;
pub mod layer_norm;
pub mod linear;

pub use conv2d::{DpConv2d, DpConv2dConfig};
pub use embedding::{DpEmbedding, DpEmbeddingConfig};
pub use group_norm::{DpGroupNorm, DpGroupNormConfig};
pub use layer_norm::{DpLayerNorm, DpLayerNormConfig};
pub use linear::{DpLinear, DpLinearConfig};

/// The module types (as Burn's visitor names them) whose parameters have per-example gradients:
/// the registry that `grad_sample::params` checks a model against.
pub const DP_LAYER_TYPES: [&str; 5] =
    ["Struct:DpLinear", "Struct:DpConv2d", "Struct:DpGroupNorm", "Struct:DpLayerNorm", "Struct:DpEmbedding"];
