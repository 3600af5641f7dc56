//! DP-LSSGD's post-processing in the DP step (seed 002): the noisy lot gradient is multiplied by
//! A_s^{-1} per parameter tensor (the authors' code, flattened in PyTorch's row-major layout) or
//! over the whole model as one vector. Smoothing after the noise is post-processing: it changes
//! no epsilon.

use crate::error::{EngineError, Result};
use burn::tensor::Tensor;
use dp_kernels::{LaplacianSmoothing, smooth};
use serde::{Deserialize, Serialize};

/// Which vectors are smoothed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SmoothingScope {
    /// Each parameter tensor on its own (the DP-LSSGD authors' code).
    Tensor,
    /// All parameters as one vector, in the model's order.
    Model,
}

/// Laplacian smoothing with its scope.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Smoothing {
    /// A_s^{-1}.
    pub operator: LaplacianSmoothing,
    /// Per tensor or whole model.
    pub scope: SmoothingScope,
}

impl Smoothing {
    /// Smooths a lot's gradient given in the model's parameter order; `transposed[i]` says that
    /// parameter i is stored as the transpose of PyTorch's layout (Linear weights are [in, out]),
    /// so that it is smoothed in the order the authors' PyTorch code flattens it.
    pub fn apply(&self, grads: Vec<Tensor<2>>, transposed: &[bool]) -> Result<Vec<Tensor<2>>> {
        let flip = |g: Tensor<2>, t: bool| if t { g.transpose() } else { g };
        let torch: Vec<Tensor<2>> = grads.into_iter().zip(transposed).map(|(g, &t)| flip(g, t)).collect();
        let smoothed = match self.scope {
            SmoothingScope::Tensor => {
                torch.into_iter().map(|g| smooth(g, &self.operator)).collect::<std::result::Result<Vec<_>, _>>()
            }
            SmoothingScope::Model => {
                let dims: Vec<[usize; 2]> = torch.iter().map(|g| g.dims()).collect();
                let flat = Tensor::cat(torch.into_iter().map(|g| g.flatten::<1>(0, 1)).collect(), 0);
                smooth(flat, &self.operator).map(|all| {
                    let mut start = 0;
                    dims.iter()
                        .map(|&[r, c]| {
                            let part = all.clone().slice(start..start + r * c).reshape([r, c]);
                            start += r * c;
                            part
                        })
                        .collect()
                })
            }
        }
        .map_err(EngineError::Unsupported)?;
        Ok(smoothed.into_iter().zip(transposed).map(|(g, &t)| flip(g, t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_io::{matrix, to_host};

    #[test]
    fn tensor_scope_smooths_linear_weights_in_pytorch_order_and_model_scope_spans_tensors() {
        let device = crate::backend::cpu().device;
        let operator = LaplacianSmoothing::new(1.5).expect("valid s");
        // A [in = 3, out = 2] weight: PyTorch stores its transpose [2, 3] and flattens that.
        let w: Vec<f32> = vec![1.0, -2.0, 0.5, 4.0, -1.0, 3.0];
        let torch_order = [w[0], w[2], w[4], w[1], w[3], w[5]];
        let want = operator.apply_fft(&torch_order);
        let tensor = Smoothing { operator, scope: SmoothingScope::Tensor };
        let out = tensor.apply(vec![matrix(w.clone(), [3, 2], &device)], &[true]).expect("smooth");
        let got = to_host(&out[0]);
        let back = [got[0], got[2], got[4], got[1], got[3], got[5]];
        for (g, e) in back.iter().zip(&want) {
            assert!((g - e).abs() < 1e-6, "{back:?} vs {want:?}");
        }
        // Whole model: the two tensors are one vector.
        let b: Vec<f32> = vec![7.0, -7.0];
        let model = Smoothing { operator, scope: SmoothingScope::Model };
        let out =
            model.apply(vec![matrix(w.clone(), [3, 2], &device), matrix(b.clone(), [1, 2], &device)], &[false, false]);
        let out = out.expect("smooth");
        let joined: Vec<f32> = w.iter().chain(&b).copied().collect();
        let want = operator.apply_fft(&joined);
        let got: Vec<f32> = out.iter().flat_map(to_host).collect();
        for (g, e) in got.iter().zip(&want) {
            assert!((g - e).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }
}
