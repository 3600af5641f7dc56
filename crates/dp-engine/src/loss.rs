//! The training loss: cross-entropy summed over the batch (not averaged), so that the gradient
//! reaching each layer's probe is each example's own gradient.

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

/// Sum over the batch of -log softmax(logits)[label].
pub fn summed_cross_entropy(logits: Tensor<2>, one_hot: Tensor<2>) -> Tensor<1> {
    (log_softmax(logits, 1) * one_hot).sum().neg()
}

/// How many rows of `logits` put their largest value on the label (as a device scalar).
pub fn correct(logits: Tensor<2>, labels: &[u8], device: &Device) -> Tensor<1, Int> {
    let b = labels.len();
    let labels: Vec<i64> = labels.iter().map(|&l| i64::from(l)).collect();
    let labels = Tensor::<1, Int>::from_data(TensorData::new(labels, [b]), device);
    logits.argmax(1).reshape([b]).equal(labels).int().sum()
}
