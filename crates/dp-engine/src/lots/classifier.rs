//! Image classifiers on image datasets: the forward pass a classifier exposes, lots of an image
//! dataset under per-example cross-entropy (what the zoo and the CLI train), and test accuracy.

use crate::error::Result;
use crate::lots::loss::{correct, cross_entropy, one_hot};
use crate::lots::source::{ExampleLosses, LotSource};
use burn::module::Module;
use burn::tensor::{Device, Tensor, TensorData};
use dp_data::ImageDataset;

/// Examples per batch when evaluating.
const EVAL_BATCH: usize = 1000;

/// A Burn module that maps images [B, C, H, W] to class logits [B, classes].
pub trait ImageClassifier: Module {
    /// The logits of a batch of images.
    fn logits(&self, x: Tensor<4>) -> Tensor<2>;
}

/// The images `indices` of `data` on `device`, with their labels.
fn images(data: &ImageDataset, indices: &[usize], device: &Device) -> (Tensor<4>, Vec<u8>) {
    let (pixels, labels) = data.batch(indices);
    let [c, h, w] = data.shape();
    (Tensor::from_data(TensorData::new(pixels, [indices.len(), c, h, w]), device), labels)
}

/// Lots of an image dataset under per-example cross-entropy.
pub struct CrossEntropyLots<'a> {
    /// The training images.
    pub data: &'a ImageDataset,
}

impl<M: ImageClassifier> LotSource<M> for CrossEntropyLots<'_> {
    fn len(&self) -> usize {
        self.data.len()
    }

    fn fingerprint(&self) -> Option<String> {
        Some(self.data.digest())
    }

    fn losses(&self, model: &M, indices: &[usize], device: &Device) -> Result<ExampleLosses> {
        let (x, labels) = images(self.data, indices, device);
        Ok(scored(model, x, &labels, self.data.classes(), device))
    }
}

/// Each image's cross-entropy under `model` (and whether it was predicted right), for images `x`
/// labelled `labels` among `classes`.
pub(crate) fn scored<M: ImageClassifier>(
    model: &M,
    x: Tensor<4>,
    labels: &[u8],
    classes: usize,
    device: &Device,
) -> ExampleLosses {
    let logits = model.logits(x);
    let targets = one_hot(labels, classes, device);
    ExampleLosses {
        losses: cross_entropy(logits.clone(), targets),
        correct: Some(correct(logits.inner(), labels, device)),
    }
}

/// The accuracy of `model` on `data` (0 for an empty set).
pub fn image_accuracy<M: ImageClassifier>(model: &M, data: &ImageDataset, device: &Device) -> Result<f64> {
    let metrics = crate::lots::source::evaluate(model, &CrossEntropyLots { data }, EVAL_BATCH, device)?;
    Ok(metrics.read().and_then(|(_, accuracy)| accuracy).unwrap_or(0.0))
}
