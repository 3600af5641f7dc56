//! The work every ERM training loop repeats: a sum of per-example loss gradients over some rows,
//! each optionally clipped. It runs in f64 on the host (the reference) or as Burn tensors in f32
//! on one of the engine's devices (`device_rows`, ndarray or wgpu), chosen once per problem
//! (`compute`).

use crate::linalg::{axpy, norm};
use crate::model::Model;
use dp_data::TabularData;
use dp_kernels::clipping::clip_scale;

/// Sums of per-example loss gradients over one table's rows.
pub trait RowSums {
    /// sum over `rows` (every row when `None`) of c_i grad_theta l(theta; x_i, y_i), where
    /// c_i = min(1, clip / (||grad_i|| + 1e-6)) when `clip` is set (DP-SGD: the engine's
    /// `clipping::clip_scale`, the one clipping formula of the workspace) and 1 otherwise.
    fn gradient_sum(&self, theta: &[f64], rows: Option<&[usize]>, clip: Option<f64>) -> Vec<f64>;
}

/// The reference implementation: one example at a time, in f64.
pub struct HostRows<'a> {
    /// The per-example loss.
    pub model: &'a dyn Model,
    /// The rows.
    pub data: &'a TabularData,
}

impl RowSums for HostRows<'_> {
    fn gradient_sum(&self, theta: &[f64], rows: Option<&[usize]>, clip: Option<f64>) -> Vec<f64> {
        let p = self.model.dim();
        let mut sum = vec![0.0; p];
        let mut g = vec![0.0; p];
        let mut add = |i: usize| match clip {
            None => self.model.add_gradient(theta, self.data.row(i), self.data.labels[i], 1.0, &mut sum),
            Some(c) => {
                g.fill(0.0);
                self.model.add_gradient(theta, self.data.row(i), self.data.labels[i], 1.0, &mut g);
                axpy(clip_scale(norm(&g), c), &g, &mut sum);
            }
        };
        match rows {
            None => (0..self.data.len()).for_each(&mut add),
            Some(rows) => rows.iter().copied().for_each(&mut add),
        }
        sum
    }
}
