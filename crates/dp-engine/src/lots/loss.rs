//! Per-example cross-entropy and correctness of a classifier's logits, for a `LotSource` of any
//! model: the DP step differentiates the sum of per-example losses, so that the gradient reaching
//! each layer is each example's own. Labels are class indices of any unsigned type (`u8` as the
//! image sets hold them, `usize` as the tables do), each below the number of classes.

use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};

/// Labels as a one-hot [B, classes] matrix. Panics on a label not below `classes` (the data
/// sets check theirs when they load).
pub fn one_hot<L: Copy + Into<usize>>(labels: &[L], classes: usize, device: &Device) -> Tensor<2> {
    let mut values = vec![0f32; labels.len() * classes];
    for (row, &label) in labels.iter().enumerate() {
        let label: usize = label.into();
        assert!(label < classes, "label {label} of example {row} is not below the {classes} classes");
        values[row * classes + label] = 1.0;
    }
    Tensor::from_data(TensorData::new(values, [labels.len(), classes]), device)
}

/// Each example's -log softmax(logits)`[label]`, `[B]`.
pub fn cross_entropy(logits: Tensor<2>, one_hot: Tensor<2>) -> Tensor<1> {
    let b = logits.dims()[0];
    (log_softmax(logits, 1) * one_hot).sum_dim(1).reshape([b]).neg()
}

/// 1 where a row of `logits` puts its largest value on the label, else 0, `[B]`.
pub fn correct<L: Copy + Into<usize>>(logits: Tensor<2>, labels: &[L], device: &Device) -> Tensor<1> {
    let b = labels.len();
    let labels: Vec<i64> = labels.iter().map(|&l| i64::try_from(l.into()).unwrap_or(-1)).collect();
    let labels = Tensor::<1, Int>::from_data(TensorData::new(labels, [b]), device);
    logits.argmax(1).reshape([b]).equal(labels).float()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Image labels (u8) and table labels (usize) give the same one-hot rows and the same
    /// correctness; a label beyond the classes is refused by name.
    #[test]
    fn labels_of_any_unsigned_type() {
        let device = crate::backend::cpu().device;
        let host = |t: Tensor<2>| t.to_data().try_to_vec::<f32>().expect("f32");
        let small: Vec<u8> = vec![2, 0, 1];
        let wide: Vec<usize> = vec![2, 0, 1];
        assert_eq!(host(one_hot(&small, 3, &device)), host(one_hot(&wide, 3, &device)));
        assert_eq!(host(one_hot(&wide, 3, &device)), [0., 0., 1., 1., 0., 0., 0., 1., 0.]);
        let logits =
            Tensor::<2>::from_data(TensorData::new(vec![0f32, 0., 9., 9., 0., 0., 9., 0., 0.], [3, 3]), &device);
        let got = correct(logits, &wide, &device).to_data().try_to_vec::<f32>().expect("f32");
        assert_eq!(got, [1.0, 1.0, 0.0]);
        let refused = std::panic::catch_unwind(|| one_hot(&[3usize], 3, &crate::backend::cpu().device));
        let message = refused.expect_err("label 3 of 3 classes").downcast::<String>().expect("a message");
        assert!(message.contains("label 3 of example 0"), "{message}");
    }
}
