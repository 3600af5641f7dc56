//! Per-example cross-entropy and correctness of a classifier's logits: the DP step differentiates
//! the sum of per-example losses, so that the gradient reaching each layer is each example's own.

use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};

/// Labels as a one-hot [B, classes] matrix.
pub fn one_hot(labels: &[u8], classes: usize, device: &Device) -> Tensor<2> {
    let mut values = vec![0f32; labels.len() * classes];
    for (row, &label) in labels.iter().enumerate() {
        values[row * classes + usize::from(label)] = 1.0;
    }
    Tensor::from_data(TensorData::new(values, [labels.len(), classes]), device)
}

/// Each example's -log softmax(logits)[label], [B].
pub fn cross_entropy(logits: Tensor<2>, one_hot: Tensor<2>) -> Tensor<1> {
    let b = logits.dims()[0];
    (log_softmax(logits, 1) * one_hot).sum_dim(1).reshape([b]).neg()
}

/// 1 where a row of `logits` puts its largest value on the label, else 0, [B].
pub fn correct(logits: Tensor<2>, labels: &[u8], device: &Device) -> Tensor<1> {
    let b = labels.len();
    let labels: Vec<i64> = labels.iter().map(|&l| i64::from(l)).collect();
    let labels = Tensor::<1, Int>::from_data(TensorData::new(labels, [b]), device);
    logits.argmax(1).reshape([b]).equal(labels).float()
}
