//! DP-LSSGD's post-processing in the DP step (Wang et al.): the noisy lot gradient is multiplied by
//! A_s^{-1} per parameter tensor (the authors' code, flattened in PyTorch's row-major layout) or
//! over the whole model as one vector. Smoothing after the noise is post-processing: it changes
//! no epsilon.

use crate::error::{EngineError, Result};
use crate::grad_sample::params::{ParamInfo, ParamTable};
use burn::tensor::Tensor;
use dp_kernels::{LaplacianSmoothing, smooth};
use serde::{Deserialize, Serialize};

/// Which vectors are smoothed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SmoothingScope {
    /// Each parameter tensor on its own (the DP-LSSGD authors' code).
    #[default]
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

/// A flat gradient reordered between Burn's layout and PyTorch's (its own inverse only for
/// square weights, so the direction is given): a Linear weight [in, out] is transposed.
fn torch_order(g: Tensor<1>, p: &ParamInfo, to_torch: bool) -> Tensor<1> {
    if !p.torch_transposed || p.shape.len() != 2 {
        return g;
    }
    let [r, c] = if to_torch { [p.shape[0], p.shape[1]] } else { [p.shape[1], p.shape[0]] };
    g.reshape([r, c]).transpose().reshape([r * c])
}

impl Smoothing {
    /// Smooths a lot's gradient, one flat tensor per parameter of `table` (in its order), each in
    /// the order the authors' PyTorch code flattens it.
    pub fn apply(&self, grads: Vec<Tensor<1>>, table: &ParamTable) -> Result<Vec<Tensor<1>>> {
        let params = table.params();
        if grads.len() != params.len() {
            return Err(EngineError::invalid(
                "smoothing",
                format!("{} gradients for {} parameters", grads.len(), params.len()),
            ));
        }
        let torch: Vec<Tensor<1>> = grads.into_iter().zip(params).map(|(g, p)| torch_order(g, p, true)).collect();
        let smoothed = match self.scope {
            SmoothingScope::Tensor => {
                torch.into_iter().map(|g| smooth(g, &self.operator)).collect::<std::result::Result<Vec<_>, _>>()
            }
            SmoothingScope::Model => smooth(Tensor::cat(torch, 0), &self.operator).map(|all| {
                let mut start = 0;
                params
                    .iter()
                    .map(|p| {
                        start += p.len();
                        all.clone().slice(start - p.len()..start)
                    })
                    .collect()
            }),
        }
        .map_err(EngineError::Unsupported)?;
        Ok(smoothed.into_iter().zip(params).map(|(g, p)| torch_order(g, p, false)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::{Linear, LinearConfig};
    use crate::tensor_io::{to_host, vector};
    use burn::module::Module;

    #[derive(Module, Debug)]
    struct Net {
        fc: Linear,
    }

    #[test]
    fn tensor_scope_smooths_linear_weights_in_pytorch_order_and_model_scope_spans_tensors() {
        let device = crate::backend::cpu().device;
        let table = ParamTable::of(&Net { fc: LinearConfig::new(3, 2).init(&device) }).expect("dp layers");
        let operator = LaplacianSmoothing::new(1.5).expect("valid s");
        // A [in = 3, out = 2] weight: PyTorch stores its transpose [2, 3] and flattens that.
        let w: Vec<f32> = vec![1.0, -2.0, 0.5, 4.0, -1.0, 3.0];
        let b: Vec<f32> = vec![7.0, -7.0];
        let torch_order = [w[0], w[2], w[4], w[1], w[3], w[5]];
        let want = operator.apply_fft(&torch_order);
        let tensor = Smoothing { operator, scope: SmoothingScope::Tensor };
        let grads = || vec![vector(w.clone(), &device), vector(b.clone(), &device)];
        let out = tensor.apply(grads(), &table).expect("smooth");
        let got = to_host(&out[0]);
        let back = [got[0], got[2], got[4], got[1], got[3], got[5]];
        for (g, e) in back.iter().zip(&want) {
            assert!((g - e).abs() < 1e-6, "{back:?} vs {want:?}");
        }
        // Whole model: the two tensors are one vector, the weight in PyTorch's order.
        let model = Smoothing { operator, scope: SmoothingScope::Model };
        let out = model.apply(grads(), &table).expect("smooth");
        let joined: Vec<f32> = torch_order.iter().chain(&b).copied().collect();
        let want = operator.apply_fft(&joined);
        let (gw, gb) = (to_host(&out[0]), to_host(&out[1]));
        let got: Vec<f32> = [gw[0], gw[2], gw[4], gw[1], gw[3], gw[5]].into_iter().chain(gb).collect();
        for (g, e) in got.iter().zip(&want) {
            assert!((g - e).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }
}
