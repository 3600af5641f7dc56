//! Binary logistic regression, l(theta; x, y) = ln(1 + exp(-y theta.x)) with y in {-1, +1}
//! (class 0 is -1, class 1 is +1): 1-Lipschitz and 1/4-smooth on the unit ball, rank-one Hessians.

use crate::linalg::Matrix;
use crate::linalg::dot;
use crate::model::{Curvature, Model, sigmoid, softplus};
use crate::rng::NoiseRng;

/// Logistic regression over `dim` features (the intercept is a feature).
#[derive(Debug, Clone)]
pub struct Logistic {
    /// Features per row.
    pub features: usize,
}

fn sign(y: usize) -> f64 {
    if y == 1 { 1.0 } else { -1.0 }
}

impl Model for Logistic {
    fn name(&self) -> &'static str {
        "logistic regression"
    }

    fn dim(&self) -> usize {
        self.features
    }

    fn init(&self, _rng: &mut NoiseRng) -> Vec<f64> {
        vec![0.0; self.features]
    }

    fn loss(&self, theta: &[f64], x: &[f64], y: usize) -> f64 {
        softplus(-sign(y) * dot(theta, x))
    }

    fn add_gradient(&self, theta: &[f64], x: &[f64], y: usize, weight: f64, out: &mut [f64]) {
        let s = sign(y);
        let coef = -s * sigmoid(-s * dot(theta, x)) * weight;
        out.iter_mut().zip(x).for_each(|(o, xi)| *o += coef * xi);
    }

    fn predict(&self, theta: &[f64], x: &[f64]) -> usize {
        usize::from(dot(theta, x) > 0.0)
    }

    fn add_hessian(&self, theta: &[f64], x: &[f64], _y: usize, weight: f64, out: &mut Matrix) -> bool {
        let u = dot(theta, x);
        let c = weight * sigmoid(u) * sigmoid(-u);
        for i in 0..x.len() {
            for j in 0..x.len() {
                out[(i, j)] += c * x[i] * x[j];
            }
        }
        true
    }

    fn gradient_bound(&self, _radius: f64) -> f64 {
        1.0
    }

    fn curvature(&self) -> Curvature {
        Curvature::Convex { smoothness: 0.25, rank_one: true }
    }

    /// Closed form: d/dx grad = a I + b x theta^T with a = -y s(-u), b = s(u) s(-u), u = y theta.x;
    /// its largest singular value solves a 2x2 problem on span{x, theta}.
    fn mixed_norm(&self, theta: &[f64], x: &[f64], y: usize) -> f64 {
        let s = sign(y);
        let u = s * dot(theta, x);
        let a = -s * sigmoid(-u);
        let b = sigmoid(u) * sigmoid(-u);
        // M^T M = a^2 I + B C B^T with B = [x, theta], C = [[0, ab], [ab, b^2 |x|^2]].
        let (xx, xt, tt) = (dot(x, x), dot(x, theta), dot(theta, theta));
        let c = [[0.0, a * b], [a * b, b * b * xx]];
        let g = [[xx, xt], [xt, tt]];
        let cg = [
            [c[0][0] * g[0][0] + c[0][1] * g[1][0], c[0][0] * g[0][1] + c[0][1] * g[1][1]],
            [c[1][0] * g[0][0] + c[1][1] * g[1][0], c[1][0] * g[0][1] + c[1][1] * g[1][1]],
        ];
        let tr = cg[0][0] + cg[1][1];
        let det = cg[0][0] * cg[1][1] - cg[0][1] * cg[1][0];
        let top = 0.5 * (tr + (tr * tr - 4.0 * det).max(0.0).sqrt());
        (a * a + top.max(0.0)).sqrt()
    }
}
