//! Per-example independence, checked rather than trusted. DP-SGD's guarantee rests on each
//! example's gradient depending on that example only: clipping then bounds one example's
//! influence on the lot's sum by C. A loss that mixes the examples of a batch (`ce * ce.mean()`,
//! a normalisation over the batch, a contrastive term) scales or shifts each example's gradient
//! by the others', so no clip bounds anyone's influence and no epsilon holds; Opacus trusts the
//! loss's reduction here. Before a run, the same examples go through the model together and each
//! alone: their losses and unclipped per-example gradient norms must agree. A loss divided by the
//! batch's size is the one benign dependence (it costs utility, not privacy): a note, not a
//! refusal.

use crate::error::{EngineError, Result};
use crate::grad_sample::batch::BatchGrads;
use crate::lots::source::{LotSource, batch_losses};
use crate::tensor_io::to_host;
use burn::module::ParamId;
use burn::tensor::Device;

/// How far (relative) a loss or squared norm may move between groupings: float reductions in
/// batches of different sizes differ by about 1e-6; a mixing loss moves them by its terms.
const TOLERANCE: f64 = 1e-3;
/// Examples grouped together.
const GROUP: usize = 3;

/// Each example's loss (the mean of its views') and squared gradient norm, on `indices` as one
/// batch of `model` (in its validation state).
fn per_example<M>(
    model: &M,
    source: &dyn LotSource<M>,
    indices: &[usize],
    frozen: &[ParamId],
    device: &Device,
) -> Result<Vec<(f64, f64)>> {
    let views = source.views();
    let (mut grads, weighted) = BatchGrads::try_compute(views, frozen, || {
        let out = batch_losses(source, model, indices, indices.len(), device)?;
        Ok((out.weighted.clone(), out.weighted))
    })?;
    let losses = to_host(&weighted);
    let mut sq = vec![0.0f64; indices.len()];
    for layer in grads.sq_norms() {
        for (total, v) in sq.iter_mut().zip(to_host(&layer)) {
            *total += f64::from(v);
        }
    }
    Ok(losses.chunks(views.max(1)).map(|v| v.iter().map(|&l| f64::from(l)).sum::<f64>()).zip(sq).collect())
}

/// True when `a` and `b` agree within the tolerance.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE * a.abs().max(b.abs()) + 1e-12
}

/// Checks that the first examples of `source` have the same loss and gradient norm through
/// `model` together as alone: a dependence is a one-line refusal naming the fix; a loss divided
/// by the batch's size gives the note that says what it costs. Layers of `frozen` parameters
/// are left out (they have no per-example gradient).
pub fn independence<M>(
    model: &M,
    source: &dyn LotSource<M>,
    frozen: &[ParamId],
    device: &Device,
) -> Result<Option<String>> {
    let n = source.len().min(GROUP);
    // One example is grouped with itself: a division by the batch's size still shows.
    let group: Vec<usize> = if n == 1 { vec![0, 0] } else { (0..n).collect() };
    let together = per_example(model, source, &group, frozen, device)?;
    let alone: Vec<(f64, f64)> =
        group.iter().map(|&i| per_example(model, source, &[i], frozen, device).map(|v| v[0])).collect::<Result<_>>()?;
    let pairs = || together.iter().zip(&alone);
    let Some((i, (t, a))) = pairs().enumerate().find(|(_, (t, a))| !(close(t.0, a.0) && close(t.1, a.1))) else {
        return Ok(None);
    };
    let b = group.len() as f64;
    if pairs().all(|(t, a)| close(t.0 * b, a.0) && close(t.1 * b * b, a.1)) {
        return Ok(Some(format!(
            "the loss is divided by the physical batch's size (each example's loss in a batch of {0} is 1/{0} of its loss alone): this costs utility, not privacy (the clipped gradients shrink with the batch and the noise does not); give each example's own loss, as dp_engine::lots::cross_entropy does",
            group.len()
        )));
    }
    Err(EngineError::invalid(
        "loss",
        format!(
            "it mixes the examples of a batch: example {} has loss {:.6} and gradient norm {:.6} in a batch of {} but {:.6} and {:.6} alone, so one example's influence is not bounded by the clip norm and no epsilon would hold; each example's loss must depend on that example only (no batch mean, batch normalisation or term across examples; dp_engine::lots::cross_entropy gives per-example losses)",
            group[i],
            t.0,
            t.1.sqrt(),
            group.len(),
            a.0,
            a.1.sqrt()
        ),
    ))
}
