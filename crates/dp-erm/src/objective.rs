//! The regularized empirical risk F(theta) = (1/n) sum_i l(theta; x_i, y_i) + (lambda/2) ||theta||^2
//! of a model on a table, with its gradient, Hessian (exact or by finite differences of the
//! gradient) and test accuracy.

use crate::linalg::Matrix;
use crate::linalg::norm;
use crate::model::Model;
use crate::row_sums::{HostRows, RowSums};
use dp_data::TabularData;

/// lambda theta + loss_sum / count: the gradient of F, or its minibatch estimate, from a sum of
/// per-example loss gradients over `count` rows (DP-SGD: the expected lot size).
pub fn regularized(theta: &[f64], lambda: f64, loss_sum: Vec<f64>, count: f64) -> Vec<f64> {
    let inv = 1.0 / count;
    theta.iter().zip(loss_sum).map(|(t, g)| lambda * t + inv * g).collect()
}

/// A model, its training rows and the L2 weight lambda.
#[derive(Clone, Copy)]
pub struct Objective<'a> {
    /// The per-example loss.
    pub model: &'a dyn Model,
    /// The rows (features in the unit ball).
    pub data: &'a TabularData,
    /// The L2 regularization weight (the strong convexity of F for convex losses).
    pub lambda: f64,
}

impl<'a> Objective<'a> {
    /// F(theta).
    pub fn value(&self, theta: &[f64]) -> f64 {
        let n = self.data.len();
        let loss: f64 = (0..n).map(|i| self.model.loss(theta, self.data.row(i), self.data.labels[i])).sum();
        loss / n as f64 + 0.5 * self.lambda * crate::linalg::dot(theta, theta)
    }

    /// grad F(theta).
    pub fn gradient(&self, theta: &[f64]) -> Vec<f64> {
        let sum = HostRows { model: self.model, data: self.data }.gradient_sum(theta, None, None);
        regularized(theta, self.lambda, sum, self.data.len() as f64)
    }

    /// The gradient of one example's regularized loss l(theta; x, y) + (lambda/2) ||theta||^2.
    pub fn example_gradient(&self, theta: &[f64], x: &[f64], y: usize) -> Vec<f64> {
        let mut g: Vec<f64> = theta.iter().map(|t| self.lambda * t).collect();
        self.model.add_gradient(theta, x, y, 1.0, &mut g);
        g
    }

    /// The exact Hessian of F, when the model has a closed form.
    pub fn hessian(&self, theta: &[f64]) -> Option<Matrix> {
        let p = self.model.dim();
        let n = self.data.len();
        let mut h = Matrix::scaled_identity(p, self.lambda);
        for i in 0..n {
            if !self.model.add_hessian(theta, self.data.row(i), self.data.labels[i], 1.0 / n as f64, &mut h) {
                return None;
            }
        }
        Some(h)
    }

    /// H v by a central difference of the gradient along v.
    pub fn hessian_vector(&self, theta: &[f64], v: &[f64]) -> Vec<f64> {
        let vn = norm(v);
        if vn == 0.0 {
            return vec![0.0; v.len()];
        }
        let h = 1e-5 * (1.0 + norm(theta)) / vn;
        let shifted = |s: f64| -> Vec<f64> { theta.iter().zip(v).map(|(t, vi)| t + s * vi).collect() };
        let (gp, gm) = (self.gradient(&shifted(h)), self.gradient(&shifted(-h)));
        gp.iter().zip(&gm).map(|(a, b)| (a - b) / (2.0 * h)).collect()
    }

    /// Fraction of `rows` the model classifies correctly.
    pub fn accuracy(&self, theta: &[f64], rows: &TabularData) -> f64 {
        let correct = (0..rows.len()).filter(|&i| self.model.predict(theta, rows.row(i)) == rows.labels[i]).count();
        correct as f64 / rows.len().max(1) as f64
    }

    /// The same objective on other rows (a perturbed copy of the data).
    pub fn on(&self, data: &'a TabularData) -> Objective<'a> {
        Objective { data, ..*self }
    }
}
