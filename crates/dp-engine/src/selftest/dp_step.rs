//! One DP step's per-example gradients on the device against the naive per-example loop on the CPU
//! reference (ndarray, or flex in a build without it): the same model (its parameters copied to the
//! device) and batch; each DP layer's per-example squared norms, and every parameter's clipped sum
//! (flat clipping at the median norm, so that some examples are clipped and others not), to 1e-4 as
//! the oracle tests hold them. The model has each kind of per-example product the engine computes:
//! a convolution whose norms are materialised, a weight-standardised one whose norms come from Gram
//! matrices (ghost), GroupNorm's scale and shift, and a dense layer.

use super::naive::{host, naive_gradients, param_grad};
use super::{Check, Tap, inputs, worst_against_peak, worst_relative};
use crate::clipping::{Clipping, clip_scale};
use crate::grad_sample::batch::{BatchGrads, ClipSpec, gradients_params};
use crate::grad_sample::params::ParamTable;
use crate::lots::loss::{cross_entropy, one_hot};
use crate::nn::init::seeded;
use crate::nn::{Conv2d, Conv2dConfig, GroupNorm, GroupNormConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::module::Module;
use burn::tensor::activation::{relu, tanh};
use burn::tensor::{Device, Tensor, TensorData};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use std::ops::Range;

/// The tap names of the suite's device outputs.
pub(super) const NORMS: &str = "dp-step: norms";
pub(super) const SUMS: &str = "dp-step: sums";

/// Examples in the batch.
const EXAMPLES: usize = 6;
/// Classes of the head.
const CLASSES: usize = 3;

/// conv1 materialises its per-example gradients (100 positions, 6 channels, 27 taps); conv2, a
/// strided, dilated and weight-standardised convolution without bias (WRN-16-4's kind), takes
/// the ghost norm through the standardisation's Jacobian (9 positions, 8 channels, 54 taps).
#[derive(Module, Debug)]
struct Probe {
    conv1: Conv2d,
    conv2: Conv2d,
    norm: GroupNorm,
    fc: Linear,
}

impl Probe {
    fn new(device: &Device) -> Self {
        Self {
            conv1: Conv2dConfig::new([3, 6], [3, 3]).with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1)).init(device),
            conv2: Conv2dConfig::new([6, 8], [3, 3])
                .with_stride([2, 2])
                .with_dilation([2, 2])
                .with_bias(false)
                .with_standardize(true)
                .init(device),
            norm: GroupNormConfig::new(2, 8).init(device),
            fc: LinearConfig::new(72, CLASSES).init(device),
        }
    }

    /// Each example's cross-entropy for the examples `range` of `x`.
    fn losses(&self, x: &Tensor<4>, labels: &[u8], range: Range<usize>) -> Tensor<1> {
        let device = x.device();
        let x = x.clone().narrow(0, range.start, range.len());
        let h = relu(self.norm.forward(self.conv2.forward(tanh(self.conv1.forward(x)))));
        let logits = self.fc.forward(h.flatten(1, 3));
        cross_entropy(logits, one_hot(&labels[range], CLASSES, &device))
    }
}

/// The DP step suite.
pub(super) fn checks(device: &Device, tap: &dyn Tap) -> Result<Vec<Check>, String> {
    let reference = crate::backend::reference();
    let (reference, reference_name) = (reference.device, reference.backend);
    // Drawn from a fixed key: the same model, so the same measured deviations, on every run.
    let model = seeded(Probe::new(&reference), &mut ChaCha20Rng::seed_from_u64(37));
    let table = ParamTable::of(&model).map_err(|e| e.to_string())?;
    let shape = [EXAMPLES, 3, 10, 10];
    let x = inputs(shape.iter().product(), 5);
    let labels: Vec<u8> = (0..EXAMPLES).map(|e| (e % CLASSES) as u8).collect();
    let on = |d: &Device| Tensor::<4>::from_data(TensorData::new(x.clone(), shape), d);
    let (x_reference, x_device) = (on(&reference), on(device));
    let naive = naive_gradients(&model, &table, EXAMPLES, |m, e| m.losses(&x_reference, &labels, e..e + 1));

    let moved = model.clone().to_device(device);
    let moved_table = ParamTable::of(&moved).map_err(|e| e.to_string())?;
    let record =
        || BatchGrads::compute(|| (moved.losses(&x_device, &labels, 0..EXAMPLES), ())).map(|(batch, ())| batch);
    let mut batch = record().map_err(|e| e.to_string())?;
    // Squared norms per layer and example, engine and loop, in the order the layers recorded.
    let layer_of = |id| moved_table.params().iter().find(|p| p.id == id).map(|p| p.layer);
    let layers: Vec<usize> = batch.layer_params().filter_map(|ids| ids.first().and_then(|id| layer_of(*id))).collect();
    let mut got = Vec::new();
    for norms in batch.sq_norms() {
        got.extend(host(norms));
    }
    tap.output(NORMS, &mut got);
    let layer_sq = |e: usize, layer: usize| -> f64 {
        table
            .params()
            .iter()
            .zip(&naive[e])
            .filter(|(p, _)| p.layer == layer)
            .map(|(_, g)| g.iter().map(|v| v * v).sum::<f64>())
            .sum()
    };
    let want: Vec<f64> = layers.iter().flat_map(|&layer| (0..EXAMPLES).map(move |e| layer_sq(e, layer))).collect();
    let recorded = layers.len() == table.layers().len();
    let mut checks = vec![Check::new(
        format!(
            "dp-step: per-example squared norms of {} layers x {EXAMPLES} examples against the naive loop on {reference_name}, max relative error",
            table.layers().len()
        ),
        if recorded { worst_relative(&got, &want, 1e-3) } else { f64::INFINITY },
        1e-4,
    )];

    let totals: Vec<f64> =
        (0..EXAMPLES).map(|e| (0..table.layers().len()).map(|l| layer_sq(e, l)).sum::<f64>().sqrt()).collect();
    let mut sorted = totals.clone();
    sorted.sort_by(f64::total_cmp);
    let clip_norm = sorted[EXAMPLES / 2];
    let spec = ClipSpec { clip_norm, clipping: Clipping::Flat, layers: table.layers().len() };
    let sums = record().map_err(|e| e.to_string())?.clipped_sum(Some(spec));
    let grads = gradients_params(sums, &moved_table).map_err(|e| e.to_string())?;
    let mut got: Vec<f64> = moved_table.params().iter().flat_map(|p| param_grad(&grads, p)).collect();
    tap.output(SUMS, &mut got);
    // Each parameter's sum against its own scale (a small GroupNorm shift beside large weights).
    let mut worst =
        if got.len() == table.params().iter().map(|p| p.len()).sum::<usize>() { 0.0 } else { f64::INFINITY };
    let mut start = 0;
    for (k, p) in table.params().iter().enumerate() {
        let want: Vec<f64> = (0..p.len())
            .map(|j| (0..EXAMPLES).map(|e| clip_scale(totals[e], clip_norm) * naive[e][k][j]).sum())
            .collect();
        let end = (start + p.len()).min(got.len());
        worst = f64::max(worst, worst_against_peak(&got[start..end], &want));
        start = end;
    }
    checks.push(Check::new(
        format!(
            "dp-step: clipped sums of {} parameters (flat clipping at the median norm) against the naive loop, max |diff| / max |sum| per parameter",
            table.params().len()
        ),
        worst,
        1e-4,
    ));
    Ok(checks)
}
