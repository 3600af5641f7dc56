//! The ERM models as a trait over flat f64 parameter vectors: per-example loss, gradient, exact
//! Hessian where one is cheap, and the constants the papers' theorems need (rows have norm <= 1).

use crate::linalg::Matrix;
use crate::linalg::power_iteration;

/// What the loss's curvature allows a theorem to assume.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Curvature {
    /// Convex in theta with Hessian eigenvalues at most `smoothness`; `rank_one` when every
    /// per-example Hessian has rank at most one (a binary GLM, as objective perturbation needs).
    Convex {
        /// Upper bound beta on the Hessian's eigenvalues of the unregularized per-example loss.
        smoothness: f64,
        /// Per-example Hessians of rank <= 1.
        rank_one: bool,
    },
    /// Not convex (the MLP).
    NonConvex,
}

/// A per-example loss l(theta; x, y) without the L2 regularizer (the objective adds it).
pub trait Model: Send + Sync {
    /// The model's name in reports.
    fn name(&self) -> &'static str;
    /// Number of parameters.
    fn dim(&self) -> usize;
    /// Starting parameters (zero for the convex models, a small random draw for the MLP).
    fn init(&self, rng: &mut crate::rng::NoiseRng) -> Vec<f64>;
    /// l(theta; x, y).
    fn loss(&self, theta: &[f64], x: &[f64], y: usize) -> f64;
    /// out += weight * grad_theta l(theta; x, y).
    fn add_gradient(&self, theta: &[f64], x: &[f64], y: usize, weight: f64, out: &mut [f64]);
    /// The predicted class.
    fn predict(&self, theta: &[f64], x: &[f64]) -> usize;
    /// out += weight * Hessian of l in theta; false when the model has no closed form.
    fn add_hessian(&self, theta: &[f64], x: &[f64], y: usize, weight: f64, out: &mut Matrix) -> bool;
    /// sup ||grad_theta l|| over ||x|| <= 1 and ||theta|| <= radius.
    fn gradient_bound(&self, radius: f64) -> f64;
    /// Convexity and smoothness of l.
    fn curvature(&self) -> Curvature;
    /// w = ||d/dx grad_theta l(theta; x, y)||_2 (spectral norm), the scale at which noise on x
    /// reaches the gradient (DBDP-ERM, Theorem 2).
    fn mixed_norm(&self, theta: &[f64], x: &[f64], y: usize) -> f64 {
        finite_difference_mixed_norm(self, theta, x, y)
    }
}

/// ||d/dx grad_theta l||_2 from central finite differences of the gradient, one column per input
/// coordinate, and power iteration on M^T M.
pub fn finite_difference_mixed_norm<M: Model + ?Sized>(model: &M, theta: &[f64], x: &[f64], y: usize) -> f64 {
    let h = 1e-5;
    let p = model.dim();
    let columns: Vec<Vec<f64>> = (0..x.len())
        .map(|j| {
            let mut xp = x.to_vec();
            let mut xm = x.to_vec();
            xp[j] += h;
            xm[j] -= h;
            let mut g = vec![0.0; p];
            model.add_gradient(theta, &xp, y, 1.0 / (2.0 * h), &mut g);
            model.add_gradient(theta, &xm, y, -1.0 / (2.0 * h), &mut g);
            g
        })
        .collect();
    let gram = |v: &[f64]| -> Vec<f64> {
        let mv: Vec<f64> = (0..p).map(|r| columns.iter().zip(v).map(|(c, vj)| c[r] * vj).sum()).collect();
        columns.iter().map(|c| c.iter().zip(&mv).map(|(a, b)| a * b).sum()).collect()
    };
    power_iteration(x.len(), gram, 1e-12, 10_000).0.sqrt()
}

/// sigmoid(z) without overflow.
pub fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 { 1.0 / (1.0 + (-z).exp()) } else { z.exp() / (1.0 + z.exp()) }
}

/// ln(1 + e^z) without overflow.
pub fn softplus(z: f64) -> f64 {
    if z > 0.0 { z + (-z).exp().ln_1p() } else { z.exp().ln_1p() }
}

/// Softmax probabilities and log-sum-exp of `logits`.
pub fn softmax(logits: &[f64]) -> (Vec<f64>, f64) {
    let m = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = logits.iter().map(|z| (z - m).exp()).collect();
    let s: f64 = e.iter().sum();
    (e.iter().map(|v| v / s).collect(), m + s.ln())
}

/// Index of the largest value.
pub fn argmax(v: &[f64]) -> usize {
    v.iter().enumerate().fold((0, f64::NEG_INFINITY), |(bi, bv), (i, &x)| if x > bv { (i, x) } else { (bi, bv) }).0
}
