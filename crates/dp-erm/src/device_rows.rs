//! The ERM models' per-example gradients as Burn tensors (f32) on an engine device: one batched
//! forward and backward pass per sum, with no per-example loop. Every layer's per-example weight
//! gradient is rank one (delta_i x_i^T), so each example's squared norm is
//! sum over layers of ||delta_i||^2 (||x_i||^2 + [layer has a bias]), and the clipped sum is one
//! matmul per layer with the deltas rescaled (the engine's book-keeping trick).
//!
//! Parameter layouts match the host models: logistic regression theta `[d]`; softmax regression
//! W [K, d] row-major; the MLP [W1 (H x d), W2 (K x H), b2 (K)].

use crate::model_kind::ModelKind;
use crate::row_sums::RowSums;
use burn::tensor::activation::{sigmoid, softmax};
use burn::tensor::{Device, Int, Tensor, TensorData};
use dp_data::TabularData;
use dp_kernels::clipping::clip_factor;
use dp_kernels::tensor_io::{matrix, to_host};

/// How the loss turns logits into their gradient delta = dl/dz.
#[derive(Debug, Clone, Copy)]
enum Head {
    /// One logit u, target s in {-1, +1}: l = ln(1 + e^{-s u}), delta = -s sigmoid(-s u).
    Logistic,
    /// K logits, one-hot target Y: l = -ln softmax(z)_y, delta = softmax(z) - Y.
    Softmax,
}

/// One table's rows on a device, with the model family that reads them.
pub struct DeviceRows {
    /// Features [n, d].
    x: Tensor<2>,
    /// Targets: signs [n, 1] (logistic) or one-hot [n, K].
    targets: Tensor<2>,
    head: Head,
    /// Hidden width H of the MLP; `None` for the linear models.
    hidden: Option<usize>,
    /// Number of logits.
    outputs: usize,
    device: Device,
}

/// Sum over each row of the squares, [b, 1].
fn row_sq(t: &Tensor<2>) -> Tensor<2> {
    t.clone().square().sum_dim(1)
}

impl DeviceRows {
    /// Uploads `data` for a model of family `kind`.
    pub fn new(kind: ModelKind, data: &TabularData, device: &Device) -> Self {
        let (n, d, k) = (data.len(), data.dim, data.classes.len());
        let x = matrix(data.features.iter().map(|&v| v as f32).collect(), [n, d], device);
        let (head, hidden, outputs) = match (kind, k) {
            (ModelKind::Logreg, 2) => (Head::Logistic, None, 1),
            (ModelKind::Logreg, _) => (Head::Softmax, None, k),
            (ModelKind::Mlp, _) => (Head::Softmax, Some(d), k),
        };
        let targets = match head {
            Head::Logistic => data.labels.iter().map(|&y| if y == 1 { 1.0 } else { -1.0 }).collect(),
            Head::Softmax => {
                let mut v = vec![0f32; n * k];
                data.labels.iter().enumerate().for_each(|(i, &y)| v[i * k + y] = 1.0);
                v
            }
        };
        let targets = matrix(targets, [n, outputs], device);
        Self { x, targets, head, hidden, outputs, device: device.clone() }
    }

    fn delta(&self, logits: Tensor<2>, targets: Tensor<2>) -> Tensor<2> {
        match self.head {
            Head::Logistic => (sigmoid(logits * targets.clone().neg()) * targets).neg(),
            Head::Softmax => {
                // softmax - Y, with the label's entry p_y - 1 taken as minus the other classes'
                // mass: in f32, 1 - p_y cancels to nothing once the model is confident.
                let others = softmax(logits, 1) * (targets.clone().neg() + 1.0);
                let rest = others.clone().sum_dim(1);
                others - targets * rest
            }
        }
    }

    /// The parameter block `[rows, cols]` starting at `at` in theta.
    fn block(&self, theta: &[f64], at: usize, shape: [usize; 2]) -> Tensor<2> {
        let values = theta[at..at + shape[0] * shape[1]].iter().map(|&v| v as f32).collect();
        matrix(values, shape, &self.device)
    }
}

/// tanh'(a) = sech^2(a) = 4 e / (1 + e)^2 with e = exp(-2 |a|): in f32, 1 - tanh(a)^2 loses its
/// relative accuracy once the unit saturates (|a| > 3), where noisy inputs put most units.
fn sech_squared(a: Tensor<2>) -> Tensor<2> {
    let e = (a.abs() * -2.0).exp();
    let denominator = (e.clone() + 1.0).square();
    e * 4.0 / denominator
}

/// Scales each row of every delta by the engine's clip factor of its example's gradient.
fn clip_rows<const L: usize>(deltas: [Tensor<2>; L], sq_norm: Tensor<2>, clip: f64) -> [Tensor<2>; L] {
    let scale = clip_factor(sq_norm, clip);
    deltas.map(|d| d * scale.clone())
}

impl RowSums for DeviceRows {
    fn gradient_sum(&self, theta: &[f64], rows: Option<&[usize]>, clip: Option<f64>) -> Vec<f64> {
        let (x, targets) = match rows {
            None => (self.x.clone(), self.targets.clone()),
            Some([]) => return vec![0.0; theta.len()],
            Some(rows) => {
                let idx: Vec<i64> = rows.iter().map(|&i| i as i64).collect();
                let idx = Tensor::<1, Int>::from_data(TensorData::new(idx, [rows.len()]), &self.device);
                (self.x.clone().select(0, idx.clone()), self.targets.clone().select(0, idx))
            }
        };
        let d = x.dims()[1];
        let k = self.outputs;
        let parts = match self.hidden {
            None => {
                let w = self.block(theta, 0, [k, d]);
                let delta = self.delta(x.clone().matmul(w.transpose()), targets);
                let delta = match clip {
                    None => delta,
                    Some(c) => {
                        let sq = row_sq(&delta) * row_sq(&x);
                        let [delta] = clip_rows([delta], sq, c);
                        delta
                    }
                };
                vec![delta.transpose().matmul(x).reshape([k * d])]
            }
            Some(h) => {
                let w1 = self.block(theta, 0, [h, d]);
                let w2 = self.block(theta, h * d, [k, h]);
                let b2 = self.block(theta, h * d + k * h, [1, k]);
                let pre = x.clone().matmul(w1.transpose());
                let act = pre.clone().tanh();
                let d2 = self.delta(act.clone().matmul(w2.clone().transpose()) + b2, targets);
                let d1 = d2.clone().matmul(w2) * sech_squared(pre);
                let [d1, d2] = match clip {
                    None => [d1, d2],
                    Some(c) => {
                        let sq = row_sq(&d1) * row_sq(&x) + row_sq(&d2) * (row_sq(&act) + 1.0);
                        clip_rows([d1, d2], sq, c)
                    }
                };
                vec![
                    d1.transpose().matmul(x).reshape([h * d]),
                    d2.clone().transpose().matmul(act).reshape([k * h]),
                    d2.sum_dim(0).reshape([k]),
                ]
            }
        };
        to_host(&Tensor::cat(parts, 0)).into_iter().map(f64::from).collect()
    }
}
