//! One step on one lot: the lot is split into physical batches that bound memory (on wgpu padded
//! with inert rows to a few shapes, [`Batching`]); each batch is forwarded with a tape, backwarded
//! once, and its per-example gradients are clipped and summed layer by layer; after the last
//! batch the sum gets Gaussian noise (N(0, (zC)^2), or the scales of the optimized mechanisms,
//! `allocation.rs`) and is divided by the expected lot size qN (never the realised size, which is
//! data-dependent), in one fused pass on the device; DP-LSSGD then smooths it (post-processing).
//! With the mechanism `none` the same pipeline runs without clipping or noise and divides by the
//! realised size: the unperturbed baseline.

use crate::canaries::WhiteBoxCanaries;
use crate::clipping::{Clipping, clip_factors};
use crate::error::{EngineError, Result};
use crate::features::{Features, zero_rows_appended};
use crate::loss::{correct, one_hot, summed_cross_entropy};
use crate::model::Model;
use crate::noise::GaussianNoise;
use crate::smoothing::Smoothing;
use crate::tape::Tape;
use burn::tensor::{Device, Int, Tensor};
use dp_kernels::NoiseScale;

/// What is done to the summed gradient of a lot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Privatizer {
    /// No clipping, no noise, mean over the realised lot (the unperturbed baseline).
    None,
    /// Clip each example to `clip_norm`, add Gaussian noise of the step's scales (`StepNoise`),
    /// divide by `expected_lot_size`.
    Gaussian {
        /// Clipping bound C.
        clip_norm: f64,
        /// Flat or per-layer clipping.
        clipping: Clipping,
        /// q * N.
        expected_lot_size: f64,
        /// Laplacian smoothing after the noise (DP-LSSGD), or none (DP-SGD).
        smoothing: Option<Smoothing>,
    },
}

/// How a lot is cut into physical batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    /// Examples per physical batch at most (bounds memory).
    pub size: usize,
    /// Each batch is padded with inert rows (zero input, all-zero label) to a multiple of this.
    pub granule: usize,
}

impl Batching {
    /// Batches of `size` for `backend`: on wgpu padded to eighths of `size`, because every new
    /// batch shape costs kernel compilation and autotuning there and a Poisson lot has a new size
    /// every step (measured on an H100: the first step 44 s, then 11 ms a step); unpadded on the
    /// CPU, where a shape costs nothing and padding only adds work.
    pub fn for_backend(size: usize, backend: &str) -> Self {
        let granule = if backend == "wgpu" { (size / 8).max(1) } else { 1 };
        Batching { size, granule }
    }

    /// The rows a batch of `len` examples is run with: `len` rounded up to the granule, never
    /// beyond the batch size (nor below `len`).
    pub fn padded(self, len: usize) -> usize {
        (len.div_ceil(self.granule.max(1)) * self.granule.max(1)).min(self.size).max(len)
    }
}

/// Where a step's examples come from.
pub trait ExampleSource {
    /// The inputs and labels of examples `indices`, on `device`.
    fn batch(&self, indices: &[usize], device: &Device) -> (Features, Vec<u8>);
    /// Number of classes.
    fn classes(&self) -> usize;
}

/// Training metrics of one lot, kept on the device until read.
#[derive(Debug, Clone)]
pub struct LotMetrics {
    /// Summed cross-entropy.
    pub loss_sum: Option<Tensor<1>>,
    /// Correct predictions.
    pub correct: Option<Tensor<1, Int>>,
    /// Examples in the lot.
    pub examples: usize,
}

impl LotMetrics {
    /// (mean loss, accuracy) on the host; None for an empty lot.
    pub fn read(&self) -> Option<(f64, f64)> {
        let n = self.examples as f64;
        let loss: f64 = self.loss_sum.clone()?.into_scalar::<f32>().into();
        let correct = self.correct.clone()?.into_scalar::<i64>() as f64;
        Some((loss / n, correct / n))
    }
}

/// The per-layer sums of the lot's (clipped, when private) per-example gradients, in the
/// model's parameter order, and the lot's metrics.
fn summed_gradients(
    model: &Model,
    source: &dyn ExampleSource,
    lot: &[usize],
    batching: Batching,
    privatizer: Privatizer,
    device: &Device,
) -> Result<(Vec<Tensor<2>>, LotMetrics)> {
    if batching.size == 0 {
        return Err(EngineError::invalid("batch size", "must be at least 1"));
    }
    let params = model.params();
    let mut sums: Vec<Tensor<2>> = params.iter().map(|p| p.zeros_like()).collect();
    let mut metrics = LotMetrics { loss_sum: None, correct: None, examples: lot.len() };
    for chunk in lot.chunks(batching.size) {
        let (x, labels) = source.batch(chunk, device);
        // Padding rows have a zero label row: zero loss, so exactly zero gradient and no effect
        // on any sum, norm or metric.
        let rows = batching.padded(chunk.len());
        let mut tape = Tape::new(device);
        let logits = model.forward(x.pad_rows(rows - chunk.len()), Some(&mut tape))?;
        let loss = summed_cross_entropy(
            logits.clone(),
            zero_rows_appended(one_hot(&labels, source.classes(), device), rows - chunk.len()),
        );
        let grads = loss.backward();
        let batch_correct = correct(logits.inner().narrow(0, 0, chunk.len()), &labels, device);
        let loss = loss.inner();
        metrics.loss_sum = Some(metrics.loss_sum.map_or(loss.clone(), |s| s + loss));
        metrics.correct = Some(metrics.correct.map_or(batch_correct.clone(), |c| c + batch_correct));
        let mut per_example = model.per_example(tape.layer_gradients(&grads)?);
        let factors = match privatizer {
            Privatizer::None => vec![None; per_example.len()],
            Privatizer::Gaussian { clip_norm, clipping, .. } => {
                let norms = per_example.iter_mut().map(|p| p.sq_norms()).collect();
                let layers = per_example.len();
                clip_factors(norms, clip_norm, clipping, layers).into_iter().map(Some).collect()
            }
        };
        for (i, (layer, s)) in per_example.iter().zip(&factors).enumerate() {
            let [w, b] = layer.weighted_sum(s.as_ref());
            sums[2 * i] = sums[2 * i].clone() + w;
            sums[2 * i + 1] = sums[2 * i + 1].clone() + b;
        }
    }
    Ok((sums, metrics))
}

/// The plain mean gradient over `examples` (no clipping, no noise): the full-data gradient that
/// seed 004 uses as its model sensitivity w.
pub fn mean_gradient(
    model: &Model,
    source: &dyn ExampleSource,
    examples: &[usize],
    batching: Batching,
    device: &Device,
) -> Result<Vec<Tensor<2>>> {
    lot_gradient(model, source, examples, batching, Privatizer::None, None, device).map(|(grads, _)| grads)
}

/// What a private step draws from: the noise stream, the scale of each parameter tensor's noise,
/// and an auditor's canaries when the run is audited.
pub struct StepDraw<'a> {
    /// The noise stream.
    pub noise: &'a mut GaussianNoise,
    /// Per parameter tensor, in the model's order.
    pub scales: &'a [NoiseScale],
    /// White-box canaries added to the clipped sum and scored from the noisy one.
    pub canaries: Option<&'a mut WhiteBoxCanaries>,
}

/// The privatised gradient of one lot (same order and shapes as the model's parameters); a
/// private step draws its noise from `draw` (the baseline takes None).
pub fn lot_gradient(
    model: &Model,
    source: &dyn ExampleSource,
    lot: &[usize],
    batching: Batching,
    privatizer: Privatizer,
    draw: Option<StepDraw<'_>>,
    device: &Device,
) -> Result<(Vec<Tensor<2>>, LotMetrics)> {
    let (mut sums, metrics) = summed_gradients(model, source, lot, batching, privatizer, device)?;
    let grads = match privatizer {
        Privatizer::None => {
            let n = lot.len().max(1) as f64;
            sums.into_iter().map(|s| s.div_scalar(n)).collect()
        }
        Privatizer::Gaussian { expected_lot_size, smoothing, .. } => {
            let StepDraw { noise, scales, mut canaries } =
                draw.ok_or_else(|| EngineError::invalid("noise", "a private step needs noise"))?;
            if scales.len() != sums.len() {
                return Err(EngineError::invalid(
                    "noise",
                    format!("{} scales for {} tensors", scales.len(), sums.len()),
                ));
            }
            if let Some(c) = canaries.as_deref_mut() {
                c.inject(&mut sums)?;
            }
            let scale = (1.0 / expected_lot_size) as f32;
            let noisy = sums
                .into_iter()
                .zip(scales)
                .map(|(s, sigma)| noise.perturb(s, sigma, scale))
                .collect::<Result<Vec<_>>>()?;
            if let Some(c) = canaries {
                c.observe(&noisy, scales, scale)?;
            }
            match smoothing {
                Some(smoothing) => smoothing.apply(noisy, &model.torch_transposed())?,
                None => noisy,
            }
        }
    };
    Ok((grads, metrics))
}
