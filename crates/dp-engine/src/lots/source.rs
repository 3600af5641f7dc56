//! A lot's summed gradient: the examples of the lot run through the model's ordinary forward
//! pass in physical batches, recorded on the tape, and every example's gradient is clipped (when
//! a bound is given) and added up, one flat tensor per parameter of the model's `ParamTable`.

use crate::error::{EngineError, Result};
use crate::grad_sample::ParamGrad;
use crate::grad_sample::batch::{BatchGrads, ClipSpec, unknown};
use crate::grad_sample::params::ParamTable;
use crate::lots::batching::Batching;
use crate::tensor_io::vector;
use burn::module::Module;
use burn::tensor::{Device, Tensor};

/// The model's loss on a batch, example by example.
pub struct ExampleLosses {
    /// Each example's loss `[B]` (the DP step differentiates their sum).
    pub losses: Tensor<1>,
    /// For classifiers, 1 where the example was predicted right and 0 elsewhere `[B]`.
    pub correct: Option<Tensor<1>>,
}

/// The training data of a run together with the model's loss on it: what lots are drawn from.
/// `losses` runs the model's ordinary forward pass; any loss works, as long as each example's
/// loss depends on that example only.
pub trait LotSource<M> {
    /// Number of training examples.
    fn len(&self) -> usize;

    /// True when there is no example.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The loss of `model` on each of the examples `indices` (repeats allowed), on `device`:
    /// [B * views] rows, an example's views consecutive; an error when the examples cannot be
    /// read (a dataset backed by files).
    fn losses(&self, model: &M, indices: &[usize], device: &Device) -> Result<ExampleLosses>;

    /// Rows per example in [`Self::losses`]: 1, or K augmented views of each example
    /// (augmentation multiplicity, De et al. 2022: an example's gradient is the mean of its
    /// views', clipped once, so each example still moves the sum by at most C).
    fn views(&self) -> usize {
        1
    }

    /// A digest of the examples the source yields, over every example in index order (hex
    /// SHA-256), recorded when a run starts and checked when it resumes, so that a run continued
    /// on another training set, or the same one reordered, is refused; None where the source
    /// cannot tell (a resume then cannot check its data).
    fn fingerprint(&self) -> Option<String> {
        None
    }

    /// Told the number of the step about to draw from it (0 for the first; `DpOptimizer::step`
    /// tells it), for a source whose examples depend on the step (augmented views): a resumed
    /// run then draws what the uninterrupted one would have.
    fn at_step(&self, _step: u64) {}
}

/// Training metrics of one lot, kept on the device until read.
#[derive(Debug, Clone, Default)]
pub struct LotMetrics {
    /// Summed loss.
    pub loss_sum: Option<Tensor<1>>,
    /// Correct predictions.
    pub correct: Option<Tensor<1>>,
    /// Examples in the lot.
    pub examples: usize,
}

fn add(total: Option<Tensor<1>>, part: Tensor<1>) -> Option<Tensor<1>> {
    Some(match total {
        Some(t) => t + part,
        None => part,
    })
}

impl LotMetrics {
    /// Adds a batch's summed loss and (when known) correct count.
    pub fn add(&mut self, loss_sum: Tensor<1>, correct: Option<Tensor<1>>) {
        self.loss_sum = add(self.loss_sum.take(), loss_sum);
        if let Some(c) = correct {
            self.correct = add(self.correct.take(), c);
        }
    }

    /// (mean loss, accuracy when known) on the host; None for an empty lot.
    pub fn read(&self) -> Option<(f64, Option<f64>)> {
        let n = self.examples as f64;
        let loss: f64 = self.loss_sum.clone()?.into_scalar::<f32>().into();
        let correct = self.correct.clone().map(|c| f64::from(c.into_scalar::<f32>()) / n);
        Some((loss / n, correct))
    }
}

/// The metrics of `model` (in its validation state) on every example of `source`, in batches of
/// `batch_size`: a test set given as a `LotSource` is evaluated with the loss that trains on the
/// training set (`read()` gives the mean loss and, for classifiers, the accuracy). Outside any DP
/// step: on the training data the metrics are not private.
pub fn evaluate<M: Module>(
    model: &M,
    source: &dyn LotSource<M>,
    batch_size: usize,
    device: &Device,
) -> Result<LotMetrics> {
    let model = model.valid();
    let indices: Vec<usize> = (0..source.len()).collect();
    let mut metrics = LotMetrics { examples: indices.len(), ..LotMetrics::default() };
    let per_batch = Batching { size: batch_size, granule: 1 }.for_views(source.views());
    for chunk in indices.chunks(per_batch.size) {
        let out = batch_losses(source, &model, chunk, chunk.len(), device)?;
        metrics.add(out.weighted.sum(), out.correct);
    }
    Ok(metrics)
}

/// A physical batch of a lot, through the model: what to differentiate and what to report.
pub(crate) struct BatchLosses {
    /// Each row's loss weighted so that their sum is the sum over the batch's real examples of
    /// the mean loss of their views (padding rows weigh 0).
    pub weighted: Tensor<1>,
    /// Correct predictions among the real examples, views averaged.
    pub correct: Option<Tensor<1>>,
}

/// The examples `chunk` of a lot through `model`, padded to `rows` examples with copies of the
/// first (inert: they weigh 0); each of the source's views weighs one over their number.
pub(crate) fn batch_losses<M>(
    source: &dyn LotSource<M>,
    model: &M,
    chunk: &[usize],
    rows: usize,
    device: &Device,
) -> Result<BatchLosses> {
    let views = source.views();
    let indices: Vec<usize> = chunk.iter().copied().chain(std::iter::repeat_n(chunk[0], rows - chunk.len())).collect();
    let out = source.losses(model, &indices, device)?;
    let got = out.losses.dims()[0];
    if views == 0 || got != rows * views {
        return Err(EngineError::data(format!(
            "the loss gave {got} values for {rows} examples of {views} views each (LotSource::losses and views disagree)"
        )));
    }
    let real = chunk.len() * views;
    let weight = 1.0 / views as f32;
    let weighted = if real == got && views == 1 {
        out.losses
    } else {
        let weights = std::iter::repeat_n(weight, real).chain(std::iter::repeat_n(0.0, got - real)).collect();
        out.losses * vector(weights, device)
    };
    let correct = out.correct.map(|c| c.narrow(0, 0, real).sum().mul_scalar(weight));
    Ok(BatchLosses { weighted, correct })
}

/// The sum over `lot` of each example's gradient of `model` (clipped as `clip` says; unclipped
/// when None), one flat tensor per parameter of `table` (zeros where the lot reached none), and
/// the lot's metrics. `model` should be in its validation state (`Module::valid`): the tape
/// gives the per-example gradients, so no parameter gradient is needed.
pub fn lot_sum<M>(
    model: &M,
    source: &dyn LotSource<M>,
    lot: &[usize],
    batching: Batching,
    table: &ParamTable,
    clip: Option<ClipSpec>,
    device: &Device,
) -> Result<(Vec<Tensor<1>>, LotMetrics)> {
    if batching.size == 0 {
        return Err(EngineError::invalid("batch size", "must be at least 1"));
    }
    let mut sums: Vec<Option<Tensor<1>>> = vec![None; table.params().len()];
    let mut metrics = LotMetrics { examples: lot.len(), ..LotMetrics::default() };
    let views = source.views();
    let batching = batching.for_views(views);
    let frozen = table.frozen_ids();
    for chunk in lot.chunks(batching.size) {
        let (mut grads, (loss_sum, correct)) = BatchGrads::try_compute(views, &frozen, || {
            let out = batch_losses(source, model, chunk, batching.padded(chunk.len()), device)?;
            Ok((out.weighted.clone(), (out.weighted.inner().sum(), out.correct)))
        })
        .map_err(|e| table.name_shared(e))?;
        metrics.add(loss_sum, correct);
        for ParamGrad { id, value } in grads.clipped_sum(clip) {
            let k = table.index_of(id).ok_or_else(|| unknown(id))?;
            sums[k] = add(sums[k].take(), value);
        }
    }
    let sums = sums
        .into_iter()
        .zip(table.params())
        .map(|(s, p)| s.unwrap_or_else(|| Tensor::zeros([p.len()], device)))
        .collect();
    Ok((sums, metrics))
}

/// The full-data mean gradient of `model` (unclipped), one flat tensor per parameter: Xiang et
/// al.'s model sensitivity w, which a noise allocation may ask for.
pub fn mean_gradient<M>(
    model: &M,
    source: &dyn LotSource<M>,
    batching: Batching,
    table: &ParamTable,
    device: &Device,
) -> Result<Vec<Tensor<1>>> {
    let everyone: Vec<usize> = (0..source.len()).collect();
    let (sums, _) = lot_sum(model, source, &everyone, batching, table, None, device)?;
    let n = source.len().max(1);
    Ok(sums.into_iter().map(|s| s.div_scalar(n as f64)).collect())
}
