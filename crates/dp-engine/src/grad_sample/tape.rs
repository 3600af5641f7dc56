//! The recording of one forward pass. [`recording`] runs a forward pass with a tape active on
//! this thread; each DP layer's forward calls [`observe`], which (only while recording) keeps the
//! layer's record and taps the layer's output (`tap`: the identity, whose backward gives dL/dz to
//! a 1x1 leaf's gradient), so that one backward of the summed loss yields dL/dz of every DP layer
//! for every example at once. A layer whose parameters are all frozen is not tapped: it costs
//! the backward pass nothing.

use super::PerExampleGrads;
use super::tap::tap;
use crate::error::{EngineError, Result};
use burn::module::ParamId;
use burn::tensor::{Gradients, Tensor};
use std::cell::RefCell;

/// Turns a DP layer's record into its per-example gradients, given dL/dz flattened to [B, rest].
pub type Finish = Box<dyn FnOnce(Tensor<2>) -> Box<dyn PerExampleGrads>>;

/// One DP layer's record: its parameters, the slot its output's tap gives dL/dz to, and how to
/// finish.
struct Entry {
    params: Vec<ParamId>,
    slot: Tensor<2>,
    /// The output's shape [B, F].
    shape: [usize; 2],
    finish: Finish,
}

/// The records of one forward pass, in forward order.
#[derive(Default)]
pub struct Tape {
    entries: Vec<Entry>,
    /// Why the forward pass cannot be privatised (the first reason found).
    refused: Option<EngineError>,
    /// The frozen parameters: a layer of only these is not recorded.
    frozen: Vec<ParamId>,
}

/// One DP layer's per-example gradients, with the parameters they belong to.
pub struct LayerGrads {
    /// The layer's parameters, in the order of its [`PerExampleGrads::weighted_sum`].
    pub params: Vec<ParamId>,
    /// Its per-example gradients.
    pub grads: Box<dyn PerExampleGrads>,
}

thread_local! {
    static ACTIVE: RefCell<Option<Tape>> = const { RefCell::new(None) };
}

/// Clears this thread's tape when a recording ends, also when the forward pass panics.
struct ActiveGuard;

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        ACTIVE.with(|a| a.borrow_mut().take());
    }
}

/// Runs `forward` with every DP layer recording, except those whose parameters are all among
/// `frozen`; returns its output and the tape. Refused when a recording is already active on this
/// thread, when a parameter was used twice, and when a layer has frozen and trained parameters.
pub fn recording<T>(frozen: &[ParamId], forward: impl FnOnce() -> T) -> Result<(T, Tape)> {
    ACTIVE.with(|a| {
        let mut a = a.borrow_mut();
        if a.is_some() {
            return Err(EngineError::Unsupported("a forward pass is already being recorded on this thread".into()));
        }
        *a = Some(Tape { frozen: frozen.to_vec(), ..Tape::default() });
        Ok(())
    })?;
    let guard = ActiveGuard;
    let output = forward();
    let tape = ACTIVE.with(|a| a.borrow_mut().take()).unwrap_or_default();
    drop(guard);
    if let Some(refusal) = tape.refused {
        return Err(refusal);
    }
    Ok((output, tape))
}

/// A DP layer's output: while a forward pass is recorded, `output` tapped (its gradient kept), with
/// the record `record()` builds kept on the tape; otherwise `output` unchanged (no cost).
/// `layer` names the layer's type and `params` its parameters.
pub fn observe<const D: usize>(
    layer: &'static str,
    params: &[ParamId],
    output: Tensor<D>,
    record: impl FnOnce() -> Finish,
) -> Tensor<D> {
    ACTIVE.with(|a| {
        let mut active = a.borrow_mut();
        let Some(tape) = active.as_mut() else { return output };
        let frozen = params.iter().filter(|id| tape.frozen.contains(id)).count();
        if frozen > 0 && frozen == params.len() {
            return output;
        }
        if frozen > 0 {
            tape.refused.get_or_insert_with(|| {
                EngineError::invalid(
                    "freeze",
                    format!("a {layer} has frozen and trained parameters: freeze all of a layer's or none"),
                )
            });
            return output;
        }
        if D < 2 {
            tape.refused
                .get_or_insert_with(|| EngineError::Unsupported(format!("a {layer}'s output has no batch dimension")));
            return output;
        }
        let shared = tape.params().find(|id| params.contains(id)).copied();
        if let Some(id) = shared {
            tape.refused.get_or_insert(EngineError::SharedParameter { id, path: None, layer });
        }
        let dims = output.dims();
        let flat = output.flatten::<2>(1, D - 1);
        let slot = Tensor::<2>::zeros([1, 1], &flat.device().autodiff()).require_grad();
        let shape = flat.dims();
        tape.entries.push(Entry { params: params.to_vec(), slot: slot.clone(), shape, finish: record() });
        tap(flat, slot).reshape(dims)
    })
}

impl Tape {
    /// Number of DP layer calls recorded.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The parameters the recorded layers named, in forward order.
    pub fn params(&self) -> impl Iterator<Item = &ParamId> {
        self.entries.iter().flat_map(|e| e.params.iter())
    }

    /// True when the forward pass went through no DP layer.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Each recorded layer's per-example gradients from the backward pass `grads`, with every
    /// `views` consecutive rows one example (1: each row is one); a layer whose output does not
    /// reach the loss has zero gradients.
    pub fn per_example(self, grads: &Gradients, views: usize) -> Result<Vec<LayerGrads>> {
        self.entries
            .into_iter()
            .map(|e| {
                let output_grad = match e.slot.grad(grads) {
                    Some(g) if g.dims() == e.shape => g.inner(),
                    Some(g) => {
                        let got = g.dims();
                        return Err(EngineError::Unsupported(format!(
                            "the tape read a gradient of shape {got:?} for an output of shape {:?}",
                            e.shape
                        )));
                    }
                    None => Tensor::zeros(e.shape, &e.slot.inner().device()),
                };
                let layer = (e.finish)(output_grad);
                let grads = if views > 1 { layer.group_views(views)? } else { layer };
                Ok(LayerGrads { params: e.params, grads })
            })
            .collect()
    }
}
