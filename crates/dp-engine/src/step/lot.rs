//! A lot's summed gradient: the examples of the lot run through the model's ordinary forward
//! pass in physical batches, recorded on the tape, and every example's gradient is clipped (when
//! a bound is given) and added up, one flat tensor per parameter of the model's `ParamTable`.

use super::batching::Batching;
use crate::error::{EngineError, Result};
use crate::grad_sample::ParamGrad;
use crate::grad_sample::batch::{BatchGrads, ClipSpec, unknown};
use crate::grad_sample::params::ParamTable;
use crate::tensor_io::vector;
use burn::module::Module;
use burn::tensor::{Device, Tensor};

/// The model's loss on a batch, example by example.
pub struct ExampleLosses {
    /// Each example's loss [B] (the DP step differentiates their sum).
    pub losses: Tensor<1>,
    /// For classifiers, 1 where the example was predicted right and 0 elsewhere [B].
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

    /// The loss of `model` on each of the examples `indices` (repeats allowed), on `device`;
    /// an error when the examples cannot be read (a dataset backed by files).
    fn losses(&self, model: &M, indices: &[usize], device: &Device) -> Result<ExampleLosses>;
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
    for chunk in indices.chunks(batch_size.max(1)) {
        let out = source.losses(&model, chunk, device)?;
        metrics.add(out.losses.sum(), out.correct.map(Tensor::sum));
    }
    Ok(metrics)
}

/// The examples of a physical batch of `rows`: the chunk, then copies of its first example
/// (inert: the mask zeroes their loss), and the mask when there is padding.
pub(crate) fn padded(chunk: &[usize], rows: usize, device: &Device) -> (Vec<usize>, Option<Tensor<1>>) {
    let pad = rows - chunk.len();
    let indices = chunk.iter().copied().chain(std::iter::repeat_n(chunk[0], pad)).collect();
    let mask = (pad > 0)
        .then(|| vector(std::iter::repeat_n(1.0, chunk.len()).chain(std::iter::repeat_n(0.0, pad)).collect(), device));
    (indices, mask)
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
    for chunk in lot.chunks(batching.size) {
        let (indices, mask) = padded(chunk, batching.padded(chunk.len()), device);
        let (mut grads, correct) = BatchGrads::try_compute(|| {
            let out = source.losses(model, &indices, device)?;
            let losses = match &mask {
                Some(m) => out.losses * m.clone(),
                None => out.losses,
            };
            Ok((losses.clone(), (losses.inner().sum(), out.correct)))
        })
        .map_err(|e| table.name_shared(e))?;
        let (loss_sum, correct) = correct;
        metrics.add(loss_sum, correct.map(|c| c.narrow(0, 0, chunk.len()).sum()));
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
