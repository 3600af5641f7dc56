//! The papers' MLP: one tanh hidden layer as wide as the input, softmax output. Parameters are
//! [W1 (H x d), W2 (K x H), b2 (K)]; the input's intercept feature plays the hidden bias.

use crate::linalg::Matrix;
use crate::model::{Curvature, Model, argmax, softmax};
use crate::rng::NoiseRng;

/// One-hidden-layer perceptron.
#[derive(Debug, Clone)]
pub struct Mlp {
    /// Input features d (hidden width H = d).
    pub features: usize,
    /// Output classes K.
    pub classes: usize,
}

struct Forward {
    hidden: Vec<f64>,
    probs: Vec<f64>,
    log_norm: f64,
    logits: Vec<f64>,
}

impl Mlp {
    fn hidden_width(&self) -> usize {
        self.features
    }

    fn forward(&self, theta: &[f64], x: &[f64]) -> Forward {
        let (d, h) = (self.features, self.hidden_width());
        let (w1, rest) = theta.split_at(h * d);
        let (w2, b2) = rest.split_at(self.classes * h);
        let hidden: Vec<f64> = w1.chunks(d).map(|w| crate::linalg::dot(w, x).tanh()).collect();
        let logits: Vec<f64> = w2.chunks(h).zip(b2).map(|(w, b)| crate::linalg::dot(w, &hidden) + b).collect();
        let (probs, log_norm) = softmax(&logits);
        Forward { hidden, probs, log_norm, logits }
    }
}

impl Model for Mlp {
    fn name(&self) -> &'static str {
        "MLP (one tanh hidden layer)"
    }

    fn dim(&self) -> usize {
        let h = self.hidden_width();
        h * self.features + self.classes * h + self.classes
    }

    fn init(&self, rng: &mut NoiseRng) -> Vec<f64> {
        let (d, h) = (self.features, self.hidden_width());
        let (s1, s2) = ((1.0 / d as f64).sqrt(), (1.0 / h as f64).sqrt());
        let mut theta: Vec<f64> = (0..h * d).map(|_| s1 * rng.normal()).collect();
        theta.extend((0..self.classes * h).map(|_| s2 * rng.normal()));
        theta.extend(std::iter::repeat_n(0.0, self.classes));
        theta
    }

    fn loss(&self, theta: &[f64], x: &[f64], y: usize) -> f64 {
        let f = self.forward(theta, x);
        f.log_norm - f.logits[y]
    }

    fn add_gradient(&self, theta: &[f64], x: &[f64], y: usize, weight: f64, out: &mut [f64]) {
        let (d, h) = (self.features, self.hidden_width());
        let f = self.forward(theta, x);
        let dz: Vec<f64> =
            f.probs.iter().enumerate().map(|(k, p)| weight * (p - f64::from(u8::from(k == y)))).collect();
        let w2 = &theta[h * d..h * d + self.classes * h];
        let (g1, rest) = out.split_at_mut(h * d);
        let (g2, gb2) = rest.split_at_mut(self.classes * h);
        for (k, row) in g2.chunks_mut(h).enumerate() {
            row.iter_mut().zip(&f.hidden).for_each(|(o, hj)| *o += dz[k] * hj);
            gb2[k] += dz[k];
        }
        for (j, row) in g1.chunks_mut(d).enumerate() {
            let back: f64 = (0..self.classes).map(|k| w2[k * h + j] * dz[k]).sum();
            let da = back * (1.0 - f.hidden[j] * f.hidden[j]);
            row.iter_mut().zip(x).for_each(|(o, xi)| *o += da * xi);
        }
    }

    fn predict(&self, theta: &[f64], x: &[f64]) -> usize {
        argmax(&self.forward(theta, x).probs)
    }

    fn add_hessian(&self, _theta: &[f64], _x: &[f64], _y: usize, _weight: f64, _out: &mut Matrix) -> bool {
        false
    }

    /// ||grad_W2||^2 + ||grad_b2||^2 <= 2 (H + 1) (|tanh| <= 1, ||p - e_y||^2 <= 2) and
    /// ||grad_W1|| <= ||W2||_2 sqrt(2) ||x|| <= sqrt(2) radius.
    fn gradient_bound(&self, radius: f64) -> f64 {
        (2.0 * (self.hidden_width() as f64 + 1.0 + radius * radius)).sqrt()
    }

    fn curvature(&self) -> Curvature {
        Curvature::NonConvex
    }
}
