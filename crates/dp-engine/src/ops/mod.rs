//! Burn backend extensions: operations whose forward or backward passes dp-engine writes itself
//! on Burn's flex CPU backend (one GEMM per example for a convolution's gradients, a single
//! pass for max pooling, GroupNorm / LayerNorm's normalisation, GroupNorm's scale and shift and the
//! activations), each keeping Burn's own
//! operations on every other backend. The DP layers (`crate::nn`) and the zoo's models call
//! them; a user's model reaches them through those layers, or calls them as any Burn operation.
//! (Their host helpers, `host::flex` and `host::gemm`, sit below both `ops` and `grad_sample`.)

pub mod activation;
pub mod conv;
pub mod normalize;
pub mod pointwise;
pub mod pool;
pub mod relu;
pub mod scale_shift;
pub mod tanh;
