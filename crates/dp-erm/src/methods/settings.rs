//! The settings every method reads: the papers' constants, the iteration counts and the
//! parameter ball, each checked when set.

use crate::error::{ErmError, Result};
use serde::Serialize;

/// Hyperparameters shared by the methods (the papers choose T and the rate by cross-validation;
/// these are fixed, documented defaults).
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// L2 weight lambda (the strong convexity Delta of the convex models).
    pub lambda: f64,
    /// Iterations T of every iterative method (DBDP-IF: R * T_local with R = ceil(T / T_local)).
    pub rounds: u64,
    /// Step size; default 1/L for the convex models and 0.5 for the MLP.
    pub learning_rate: Option<f64>,
    /// Sampling rate q of DBDP (minibatch qn) and of DP-SGD (Poisson).
    pub sample_rate: f64,
    /// delta of every guarantee.
    pub delta: f64,
    /// The papers' unspecified constant c.
    pub c: f64,
    /// The unspecified constant c1 of DBDP Theorem 2's range eps < c1 T / n^2.
    pub c1: f64,
    /// Local iterations T_local of DBDP-IF.
    pub t_local: u64,
    /// DP-SGD clipping norm; default the loss-gradient bound (convex models) or 1 (MLP).
    pub clip_norm: Option<f64>,
    /// Parameter ball radius; default G0 / lambda for convex models, 10 for the MLP.
    pub radius: Option<f64>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            lambda: 0.001,
            rounds: 100,
            learning_rate: None,
            sample_rate: 0.1,
            delta: 1e-5,
            c: 1.0,
            c1: 1.0,
            t_local: 10,
            clip_norm: None,
            radius: None,
        }
    }
}

/// The MLP's default parameter radius.
pub const MLP_RADIUS: f64 = 10.0;

fn positive(name: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(ErmError::InvalidParameter { name, reason: format!("{value} must be a positive number") })
    }
}

impl Settings {
    /// Checks every field; no privacy parameter is ever clamped.
    pub fn validate(&self) -> Result<()> {
        positive("lambda", self.lambda)?;
        positive("c", self.c)?;
        positive("c1", self.c1)?;
        if let Some(v) = self.learning_rate {
            positive("learning rate", v)?;
        }
        if let Some(v) = self.clip_norm {
            positive("clip norm", v)?;
        }
        if let Some(v) = self.radius {
            positive("radius", v)?;
        }
        if !(self.sample_rate > 0.0 && self.sample_rate <= 1.0) {
            return Err(ErmError::InvalidParameter {
                name: "sample rate",
                reason: format!("{} must lie in (0, 1]", self.sample_rate),
            });
        }
        if !(self.delta > 0.0 && self.delta < 1.0) {
            return Err(ErmError::InvalidParameter {
                name: "delta",
                reason: format!("{} must lie in (0, 1)", self.delta),
            });
        }
        if self.rounds == 0 || self.t_local == 0 {
            return Err(ErmError::InvalidParameter {
                name: "rounds",
                reason: "T and T_local must be at least 1".into(),
            });
        }
        Ok(())
    }
}
