//! Clip factors s_b = min(1, C / ||g_b||) from per-example squared norms, for the whole model
//! (flat clipping) or for each DP layer with bound C / sqrt(layers) so that the whole example's
//! clipped gradient still has norm at most C and the noise scale is unchanged.

use burn::tensor::Tensor;
use serde::{Deserialize, Serialize};

/// Where the clipping bound applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Clipping {
    /// One bound C on each example's whole gradient.
    Flat,
    /// A bound C / sqrt(layers) on each DP layer's part of each example's gradient.
    PerLayer,
}

impl Clipping {
    /// The bound on one example's part of each of `layers` DP layers under clipping bound C.
    pub fn layer_bound(self, clip_norm: f64, layers: usize) -> f64 {
        match self {
            Clipping::Flat => clip_norm,
            Clipping::PerLayer => clip_norm / (layers.max(1) as f64).sqrt(),
        }
    }
}

/// Opacus's guard against division by a zero norm; it keeps every clipped norm strictly below C.
const NORM_EPSILON: f64 = 1e-6;

/// min(1, bound / (||g|| + 1e-6)) for one example's gradient of norm `norm`: the one clipping
/// formula of the workspace, here on the host (DP-ERM's f64 reference loop).
pub fn clip_scale(norm: f64, bound: f64) -> f64 {
    (bound / (norm + NORM_EPSILON)).min(1.0)
}

/// [`clip_scale`] of every example, from their squared norms (any shape, one per example).
pub fn clip_factor<const D: usize>(sq_norms: Tensor<D>, bound: f64) -> Tensor<D> {
    sq_norms.sqrt().add_scalar(NORM_EPSILON).recip().mul_scalar(bound).clamp_max(1.0)
}

/// The clip factor `[B]` of every layer, given each recorded layer's per-example squared norms `[B]`;
/// per-layer bounds are C / sqrt(`model_layers`), the model's DP layer count (not the layers a
/// batch reached), so that the bound is the same in every batch.
pub fn clip_factors(
    layer_sq_norms: Vec<Tensor<1>>,
    clip_norm: f64,
    clipping: Clipping,
    model_layers: usize,
) -> Vec<Tensor<1>> {
    let recorded = layer_sq_norms.len();
    match clipping {
        Clipping::Flat => {
            let total = layer_sq_norms.into_iter().reduce(|a, b| a + b);
            total.map(|t| vec![clip_factor(t, clip_norm); recorded]).unwrap_or_default()
        }
        Clipping::PerLayer => {
            let bound = clipping.layer_bound(clip_norm, model_layers);
            layer_sq_norms.into_iter().map(|n| clip_factor(n, bound)).collect()
        }
    }
}
