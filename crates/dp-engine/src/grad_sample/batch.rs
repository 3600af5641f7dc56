//! One physical batch through a model of DP layers: the forward pass recorded on the tape, one
//! backward of the summed loss, then every DP layer's per-example gradients, clipped and summed
//! into one gradient per parameter (keyed by `ParamId`), as Burn's optimisers take them.

use super::ParamGrad;
use super::params::ParamTable;
use super::tape::{LayerGrads, recording};
use crate::clipping::{Clipping, clip_factors};
use crate::error::{EngineError, Result};
use crate::host::phases::{Phase, timed};
use burn::module::ParamId;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

/// The per-example gradients of one batch, layer by layer.
pub struct BatchGrads {
    layers: Vec<LayerGrads>,
}

/// Clipping of each example's gradient: flat to `clip_norm`, or per DP layer to
/// clip_norm / sqrt(`layers`) (the model's DP layer count, so that the bound does not depend on
/// which layers a batch reached).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClipSpec {
    /// The bound C on each example's whole gradient.
    pub clip_norm: f64,
    /// Flat or per layer.
    pub clipping: Clipping,
    /// DP layers of the model.
    pub layers: usize,
}

impl BatchGrads {
    /// Runs `forward` with the tape (it returns each example's loss `[B]` and anything else the
    /// caller wants back, such as logits), then one backward of the summed loss.
    pub fn compute<T>(forward: impl FnOnce() -> (Tensor<1>, T)) -> Result<(Self, T)> {
        Self::try_compute(1, &[], || Ok(forward()))
    }

    /// [`Self::compute`] of a forward pass that can fail (its data could not be read), whose rows
    /// come `views` to an example (augmentation multiplicity): each example's gradient is the
    /// sum of its views' (the losses are weighted by the caller), clipped as one. Layers whose
    /// parameters are all `frozen` are not recorded.
    pub fn try_compute<T>(
        views: usize,
        frozen: &[ParamId],
        forward: impl FnOnce() -> Result<(Tensor<1>, T)>,
    ) -> Result<(Self, T)> {
        let (out, tape) = timed(Phase::Forward, || recording(frozen, forward))?;
        let (losses, extra) = out?;
        if tape.is_empty() {
            return Err(EngineError::Unsupported("the forward pass went through no trained DP layer".into()));
        }
        let rows = losses.dims()[0];
        if views == 0 || rows % views != 0 {
            return Err(EngineError::invalid("views", format!("{rows} losses are not {views} views per example")));
        }
        let layers = timed(Phase::Backward, || tape.per_example(&losses.sum().backward(), views))?;
        Ok((Self { layers }, extra))
    }

    /// Each recorded DP layer's parameters, in forward order.
    pub fn layer_params(&self) -> impl Iterator<Item = &[ParamId]> {
        self.layers.iter().map(|l| l.params.as_slice())
    }

    /// Each DP layer's per-example squared norms `[B]`, in forward order.
    pub fn sq_norms(&mut self) -> Vec<Tensor<1>> {
        self.layers.iter_mut().map(|l| l.grads.sq_norms()).collect()
    }

    /// Each recorded layer's parameters, its per-example squared norms `[B]` and the sum of its
    /// examples' gradients weighted by `factors` `[B]`, in forward order: what clipping computes,
    /// with factors of the caller's choosing (the dry run checks each layer's rule by them).
    pub fn norms_and_sums(&mut self, factors: &Tensor<1>) -> Vec<(Vec<ParamId>, Tensor<1>, Vec<ParamGrad>)> {
        let layer = |l: &mut LayerGrads| (l.params.clone(), l.grads.sq_norms(), l.grads.weighted_sum(Some(factors)));
        self.layers.iter_mut().map(layer).collect()
    }

    /// The sum over examples of each example's gradient, clipped as `clip` says (unclipped when
    /// None), one entry per parameter the batch reached.
    pub fn clipped_sum(&mut self, clip: Option<ClipSpec>) -> Vec<ParamGrad> {
        let factors: Vec<Option<Tensor<1>>> = match clip {
            None => vec![None; self.layers.len()],
            Some(ClipSpec { clip_norm, clipping, layers }) => {
                // Per-layer bounds split C over the model's layers; should a forward pass record
                // more layers than that (a layer of a user's that records twice), over those, so
                // that each example's whole gradient stays within C.
                let layers = layers.max(self.layers.len());
                let norms = timed(Phase::Norms, || self.sq_norms());
                timed(Phase::ClipFactors, || clip_factors(norms, clip_norm, clipping, layers))
                    .into_iter()
                    .map(Some)
                    .collect()
            }
        };
        timed(Phase::ClippedSums, || {
            self.layers.iter().zip(&factors).flat_map(|(l, s)| l.grads.weighted_sum(s.as_ref())).collect()
        })
    }
}

/// Burn's `GradientsParams` from flat gradients, reshaped to each parameter's shape in `table`.
pub fn gradients_params(grads: Vec<ParamGrad>, table: &ParamTable) -> Result<GradientsParams> {
    let mut out = GradientsParams::new();
    for ParamGrad { id, value } in grads {
        let info = table.get(id).ok_or_else(|| unknown(id))?;
        let s = &info.shape;
        match s.len() {
            1 => out.register(id, value.reshape([s[0]])),
            2 => out.register(id, value.reshape([s[0], s[1]])),
            3 => out.register(id, value.reshape([s[0], s[1], s[2]])),
            4 => out.register(id, value.reshape([s[0], s[1], s[2], s[3]])),
            rank => {
                return Err(EngineError::Unsupported(format!("parameter `{}` has rank {rank}", info.path)));
            }
        }
    }
    Ok(out)
}

/// The refusal of a gradient for a parameter that is not in the model's `ParamTable`.
pub(crate) fn unknown(id: ParamId) -> EngineError {
    EngineError::Unsupported(format!(
        "a DP layer used in the forward pass (parameter {id}) is not part of the model given"
    ))
}
