//! The DP-ERM methods of Kang et al.'s two papers and the baselines they compare against, run on
//! one prepared problem (model, scaled train/test rows, the non-private optimum).

mod cost;
mod dbdp;
mod dbdp_influence;
mod gradient_perturbation;
mod input_perturbation;
mod method;
mod objective_perturbation;
mod output_perturbation;
mod problem;
mod settings;

use crate::error::{ErmError, Result};
use crate::rng::NoiseRng;
use dp_accounting::{BasicComposition, DpEvent, PrivacyReport};
use dp_data::TabularData;

pub use method::Method;
pub use problem::Problem;
pub use settings::{MLP_RADIUS, Settings};

/// One private run's result.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// theta_priv.
    pub theta: Vec<f64>,
    /// The privacy claim with its label.
    pub privacy: PrivacyReport,
    /// The method's main noise standard deviation (per coordinate).
    pub noise_std: f64,
    /// What the user should know about this run.
    pub notes: Vec<String>,
    /// The perturbed training set D_priv (input, dbdp, dbdp-if).
    pub private_data: Option<TabularData>,
}

/// A copy of `data` with N(0, sigma^2) added to every feature of every row (labels unchanged).
pub fn perturb_rows(data: &TabularData, sigma: f64, rng: &mut NoiseRng) -> TabularData {
    let noise = rng.gaussian(data.features.len(), sigma);
    TabularData { features: data.features.iter().zip(noise).map(|(x, b)| x + b).collect(), ..data.clone() }
}

/// The labelled epsilon of a release analysed only by `paper`'s bound: basic composition does
/// not support it, so the label is paper-bound.
pub fn paper_bound(paper: &str, epsilon: f64, delta: f64) -> Result<PrivacyReport> {
    Ok(BasicComposition::of(DpEvent::PaperBound { paper: paper.into(), epsilon, delta }, delta)?)
}

/// The labelled epsilon of a release with no privacy: infinite, label none.
pub fn non_private(delta: f64) -> Result<PrivacyReport> {
    Ok(BasicComposition::of(DpEvent::NonPrivate { what: "the minimizer of F on the training data".into() }, delta)?)
}

/// What one run of `method` on `problem` costs, in passes over its training rows.
pub fn cost(problem: &Problem, method: Method) -> Cost {
    match method {
        Method::Input => input_perturbation::cost(problem),
        Method::Dbdp => dbdp::cost(problem),
        Method::DbdpIf => dbdp_influence::cost(problem),
        Method::Gradient => gradient_perturbation::cost(problem),
        Method::Output => output_perturbation::cost(problem),
        Method::Objective => objective_perturbation::cost(problem),
        Method::NonPrivate => Cost::per_run(0.0),
    }
}

/// Runs `method` at `epsilon` (ignored by the non-private baseline).
pub fn run(problem: &Problem, method: Method, epsilon: f64, rng: &mut NoiseRng) -> Result<Outcome> {
    if method.is_private() && !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(ErmError::InvalidParameter {
            name: "epsilon",
            reason: format!("{epsilon} must be a positive number"),
        });
    }
    match method {
        Method::Input => input_perturbation::run(problem, epsilon, rng),
        Method::Dbdp => dbdp::run(problem, epsilon, rng),
        Method::DbdpIf => dbdp_influence::run(problem, epsilon, rng),
        Method::Gradient => gradient_perturbation::run(problem, epsilon, rng, None),
        Method::Output => output_perturbation::run(problem, epsilon, rng),
        Method::Objective => objective_perturbation::run(problem, epsilon, rng),
        Method::NonPrivate => Ok(Outcome {
            theta: problem.optimum.clone(),
            privacy: non_private(problem.settings.delta)?,
            noise_std: 0.0,
            notes: vec!["no privacy: the minimizer of F on the training data".into()],
            private_data: None,
        }),
    }
}

pub use cost::{Cost, Took};
pub use dbdp_influence::{contribution_ratio, influence};
pub use gradient_perturbation::{GradientCanaries, run as dp_sgd};
pub use objective_perturbation::ObjectiveNoise;
pub use output_perturbation::output_sensitivity;
