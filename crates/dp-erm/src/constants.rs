//! The constants the theorems need, for the report: the loss's Lipschitz constant G over the
//! parameter ball, its smoothness and strong convexity.

use crate::model::{Curvature, Model};
use serde::Serialize;

/// Bounds on the regularized per-example loss l(theta; x, y) + (lambda/2) ||theta||^2 over
/// ||x|| <= 1 and ||theta|| <= radius.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LossConstants {
    /// The parameter ball every method projects onto.
    pub radius: f64,
    /// sup ||grad l|| without the regularizer (the output/objective perturbation sensitivity).
    pub loss_gradient_bound: f64,
    /// G = loss_gradient_bound + lambda * radius, the Lipschitz constant of the regularized loss.
    pub lipschitz: f64,
    /// L = beta + lambda, where beta bounds the loss Hessian (convex models only).
    pub smoothness: Option<f64>,
    /// Delta = lambda, the strong convexity (convex models only).
    pub strong_convexity: Option<f64>,
}

impl LossConstants {
    /// The constants of `model` with weight `lambda`; the radius defaults to
    /// loss_gradient_bound / lambda for convex models (it contains the minimizer) and must be
    /// given for the MLP.
    pub fn of(model: &dyn Model, lambda: f64, radius: Option<f64>, mlp_radius: f64) -> Self {
        let bound0 = model.gradient_bound(0.0);
        let (radius, smoothness, strong_convexity) = match model.curvature() {
            Curvature::Convex { smoothness, .. } => {
                (radius.unwrap_or(bound0 / lambda), Some(smoothness + lambda), Some(lambda))
            }
            Curvature::NonConvex => (radius.unwrap_or(mlp_radius), None, None),
        };
        let loss_gradient_bound = model.gradient_bound(radius);
        Self {
            radius,
            loss_gradient_bound,
            lipschitz: loss_gradient_bound + lambda * radius,
            smoothness,
            strong_convexity,
        }
    }
}
