//! Unnormalised 2-D FFTs of row-major complex images (numpy's `fft2`, and `ifft2` with its
//! 1 / (M N)), with the plans of each size kept.

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};
use std::collections::HashMap;
use std::sync::Arc;

/// Plans of the sizes used so far.
pub struct Fft2 {
    planner: FftPlanner<f64>,
    plans: HashMap<(usize, bool), Arc<dyn Fft<f64>>>,
}

impl Default for Fft2 {
    fn default() -> Self {
        Self { planner: FftPlanner::new(), plans: HashMap::new() }
    }
}

impl Fft2 {
    fn plan(&mut self, len: usize, inverse: bool) -> Arc<dyn Fft<f64>> {
        let planner = &mut self.planner;
        self.plans
            .entry((len, inverse))
            .or_insert_with(|| if inverse { planner.plan_fft_inverse(len) } else { planner.plan_fft_forward(len) })
            .clone()
    }

    fn transform(&mut self, data: &mut [Complex<f64>], m: usize, n: usize, inverse: bool) {
        let rows = self.plan(n, inverse);
        rows.process(data);
        let cols = self.plan(m, inverse);
        let mut column = vec![Complex::new(0.0, 0.0); m];
        for c in 0..n {
            column.iter_mut().enumerate().for_each(|(r, v)| *v = data[r * n + c]);
            cols.process(&mut column);
            column.iter().enumerate().for_each(|(r, v)| data[r * n + c] = *v);
        }
    }

    /// The forward transform of the m x n image `data`, in place.
    pub fn forward(&mut self, data: &mut [Complex<f64>], m: usize, n: usize) {
        self.transform(data, m, n, false);
    }

    /// The inverse transform of the m x n image `data`, in place, divided by m n.
    pub fn inverse(&mut self, data: &mut [Complex<f64>], m: usize, n: usize) {
        self.transform(data, m, n, true);
        let scale = 1.0 / (m * n) as f64;
        data.iter_mut().for_each(|v| *v *= scale);
    }
}
