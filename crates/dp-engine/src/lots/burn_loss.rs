//! burn-nn's `CrossEntropyLoss` as its user configured it (logits or probabilities, label
//! smoothing, class weights, padding tokens), per example: what its `forward` averages over the
//! batch, left unaveraged, since DP-SGD clips each example's gradient. A weighted mean divides by
//! the batch's total weight, which depends on the other examples: per example, the loss is the
//! example's weight times its own.

use burn::nn::loss::CrossEntropyLoss;
use burn::tensor::activation::log_softmax;
use burn::tensor::{Int, Tensor};

/// Each example's loss under `loss`, `[B]`, for `logits` `[B, C]` (probabilities where the loss
/// was configured for them) and class indices `targets` `[B]`; a padding token's example weighs 0.
pub fn per_example(loss: &CrossEntropyLoss, logits: Tensor<2>, targets: Tensor<1, Int>) -> Tensor<1> {
    let [b, c] = logits.dims();
    let log_p = match loss.logits {
        true => log_softmax(logits, 1),
        // burn-nn's clamp away from zero.
        false => logits.clamp_min(f32::MIN_POSITIVE.sqrt()).log(),
    };
    let one_hot: Tensor<2> = targets.clone().one_hot::<2>(c).float();
    let aimed = match loss.smoothing {
        Some(alpha) => one_hot.mul_scalar(1.0 - alpha).add_scalar(alpha / c as f32),
        None => one_hot,
    };
    let weighted = match &loss.weights {
        Some(w) => aimed * w.clone().reshape([1, c]),
        None => aimed,
    };
    let losses = (log_p * weighted).sum_dim(1).reshape([b]).neg();
    match &loss.pad_tokens {
        Some(pads) => pads.iter().fold(losses, |l, &pad| l * targets.clone().not_equal_elem(pad as i64).float()),
        None => losses,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::loss::CrossEntropyLossConfig;
    use burn::tensor::TensorData;

    /// Each configuration's per-example losses average to burn-nn's own loss (their mean over
    /// the unpadded examples; weighted: their sum over the targets' total weight).
    #[test]
    fn per_example_losses_are_what_burn_nn_averages() {
        let device = crate::backend::cpu().device;
        let logits: Vec<f32> = (0..12).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.3).collect();
        let logits = || Tensor::<2>::from_data(TensorData::new(logits.clone(), [4, 3]), &device);
        let targets = || Tensor::<1, Int>::from_data(TensorData::new(vec![2i64, 0, 1, 2], [4]), &device);
        let scalar = |t: Tensor<1>| f64::from(t.into_scalar::<f32>());
        let configs = [
            (CrossEntropyLossConfig::new(), 4.0),
            (CrossEntropyLossConfig::new().with_smoothing(Some(0.1)), 4.0),
            (CrossEntropyLossConfig::new().with_pad_tokens(Some(vec![0])), 3.0),
            (CrossEntropyLossConfig::new().with_weights(Some(vec![1.0, 2.0, 0.5])), 0.5 + 1.0 + 2.0 + 0.5),
        ];
        for (config, divisor) in configs {
            let loss = config.init(&device);
            let burn = scalar(loss.forward(logits(), targets()));
            let ours = scalar(per_example(&loss, logits(), targets()).sum()) / divisor;
            assert!((burn - ours).abs() < 1e-6 * burn.abs().max(1.0), "{config:?}: {burn} vs {ours}");
        }
        let probabilities = CrossEntropyLossConfig::new().with_logits(false).init(&device);
        let p = burn::tensor::activation::softmax(logits(), 1);
        let burn = scalar(probabilities.forward(p.clone(), targets()));
        assert!((burn - scalar(per_example(&probabilities, p, targets()).sum()) / 4.0).abs() < 1e-6);
    }
}
