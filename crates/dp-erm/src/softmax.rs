//! Softmax (multinomial logistic) regression, l(W; x, y) = -ln softmax(W x)_y: sqrt(2)-Lipschitz
//! and 1/2-smooth on the unit ball; its Hessians have rank up to K - 1.

use crate::linalg::Matrix;
use crate::model::{Curvature, Model, argmax, softmax};
use crate::rng::NoiseRng;

/// Softmax regression with `classes` rows of `features` weights (row-major).
#[derive(Debug, Clone)]
pub struct Softmax {
    /// Features per row.
    pub features: usize,
    /// Number of classes K.
    pub classes: usize,
}

impl Softmax {
    fn logits(&self, theta: &[f64], x: &[f64]) -> Vec<f64> {
        theta.chunks(self.features).map(|w| crate::linalg::dot(w, x)).collect()
    }
}

impl Model for Softmax {
    fn name(&self) -> &'static str {
        "softmax regression"
    }

    fn dim(&self) -> usize {
        self.features * self.classes
    }

    fn init(&self, _rng: &mut NoiseRng) -> Vec<f64> {
        vec![0.0; self.dim()]
    }

    fn loss(&self, theta: &[f64], x: &[f64], y: usize) -> f64 {
        let z = self.logits(theta, x);
        softmax(&z).1 - z[y]
    }

    fn add_gradient(&self, theta: &[f64], x: &[f64], y: usize, weight: f64, out: &mut [f64]) {
        let (p, _) = softmax(&self.logits(theta, x));
        for (k, row) in out.chunks_mut(self.features).enumerate() {
            let coef = weight * (p[k] - f64::from(u8::from(k == y)));
            row.iter_mut().zip(x).for_each(|(o, xi)| *o += coef * xi);
        }
    }

    fn predict(&self, theta: &[f64], x: &[f64]) -> usize {
        argmax(&self.logits(theta, x))
    }

    fn add_hessian(&self, theta: &[f64], x: &[f64], _y: usize, weight: f64, out: &mut Matrix) -> bool {
        let (p, _) = softmax(&self.logits(theta, x));
        let d = self.features;
        for k in 0..self.classes {
            for l in 0..self.classes {
                let c = weight * (if k == l { p[k] } else { 0.0 } - p[k] * p[l]);
                for i in 0..d {
                    for j in 0..d {
                        out[(k * d + i, l * d + j)] += c * x[i] * x[j];
                    }
                }
            }
        }
        true
    }

    fn gradient_bound(&self, _radius: f64) -> f64 {
        std::f64::consts::SQRT_2
    }

    fn curvature(&self) -> Curvature {
        Curvature::Convex { smoothness: 0.5, rank_one: false }
    }
}
