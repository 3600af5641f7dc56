//! The sigma solver of the optimized additive noise mechanism under one sphere (L2 clipping),
//! against its closed form: after 2,000 iterations every sigma whose weight is not zero is the
//! uniform alpha / sqrt(tau) to 1e-3, a zero-weight coordinate takes no less, and the final
//! rescaling makes alpha / min sigma = sqrt(tau) exactly (docs/KERNELS.md).

use super::{Check, Tap, observed};
use crate::tensor_io::vector;
use burn::tensor::Device;
use dp_kernels::sigma_solver::SolverSchedule;
use dp_kernels::sphere_sigma;

/// The tap name of the suite's device output.
pub(super) const SIGMA: &str = "solver: sigma";

/// The solver suite.
pub(super) fn checks(device: &Device, tap: &dyn Tap) -> Result<Vec<Check>, String> {
    let (alpha, tau) = (2.0f64, 0.3f64);
    let d = 300;
    // Weights over three orders of magnitude, every eleventh zero.
    let weights: Vec<f32> =
        (0..d).map(|i| if i % 11 == 5 { 0.0 } else { 0.01 + (i * 37 % 101) as f32 / 10.0 }).collect();
    let schedule = SolverSchedule { iterations: 2000, ..SolverSchedule::default() };
    let sigma = observed(&sphere_sigma(vector(weights.clone(), device), alpha, tau, &schedule)?, SIGMA, tap);
    let uniform = alpha / tau.sqrt();
    let paid = sigma.iter().zip(&weights).filter(|(_, w)| **w > 0.0).map(|(s, _)| (s - uniform).abs() / uniform);
    let free = sigma.iter().zip(&weights).filter(|(_, w)| **w == 0.0).map(|(s, _)| (uniform - s).max(0.0) / uniform);
    let nan_is_worst = |e: f64| if e.is_nan() { f64::INFINITY } else { e };
    let least = sigma.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(vec![
        Check::new(
            format!("solver: sigma against alpha / sqrt(tau), d = {d}, 2000 iterations, max relative error"),
            paid.map(nan_is_worst).fold(0.0, f64::max),
            1e-3,
        ),
        Check::new(
            "solver: zero-weight sigma below alpha / sqrt(tau), relative",
            free.map(nan_is_worst).fold(0.0, f64::max),
            1e-6,
        ),
        Check::new(
            "solver: feasibility, |alpha / min sigma - sqrt(tau)| / sqrt(tau)",
            nan_is_worst((alpha / least - tau.sqrt()).abs() / tau.sqrt()),
            1e-6,
        ),
    ])
}
