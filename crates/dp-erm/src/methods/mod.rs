//! The DP-ERM methods of Kang et al.'s two papers and the baselines they compare against, run on
//! one prepared problem (model, scaled train/test rows, the non-private optimum).

mod cost;
mod dbdp;
mod dbdp_influence;
mod gradient_perturbation;
mod input_perturbation;
mod objective_perturbation;
mod output_perturbation;

use crate::compute::Compute;
use crate::constants::LossConstants;
use crate::error::{ErmError, Result};
use crate::inverse_hessian::InverseHessian;
use crate::model::Model;
use crate::model_kind::ModelKind;
use crate::objective::Objective;
use crate::rng::NoiseRng;
use crate::row_sums::RowSums;
use crate::solver::{Minimizer, gradient_descent};
use dp_accounting::{BasicComposition, DpEvent, PrivacyReport};
use dp_data::TabularData;
use serde::Serialize;
use std::fmt;
use std::sync::OnceLock;

/// A DP-ERM method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Kang et al.'s input perturbation, Algorithm 1: perturb every row once, then full-batch gradient descent.
    Input,
    /// Kang et al.'s DBDP-ERM, Algorithm 1: perturb every row once, then minibatch SGD.
    Dbdp,
    /// Kang et al.'s DBDP-ERM, Algorithm 2: influence-function threshold, per-example noise (Theorem 2).
    DbdpIf,
    /// DP-SGD with Poisson sampling, clipping and RDP accounting (certified).
    Gradient,
    /// The minimizer plus Gaussian noise scaled to its sensitivity (certified, convex only).
    Output,
    /// Kifer et al. 2012 objective perturbation (certified, binary GLMs only).
    Objective,
    /// No privacy: L* and the accuracy ceiling.
    NonPrivate,
}

impl Method {
    /// Every method, in report order.
    pub const ALL: [Method; 7] = [
        Method::Input,
        Method::Dbdp,
        Method::DbdpIf,
        Method::Gradient,
        Method::Output,
        Method::Objective,
        Method::NonPrivate,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Input => "input",
            Method::Dbdp => "dbdp",
            Method::DbdpIf => "dbdp-if",
            Method::Gradient => "gradient",
            Method::Output => "output",
            Method::Objective => "objective",
            Method::NonPrivate => "non-private",
        }
    }

    /// The method named `name`.
    pub fn parse(name: &str) -> Result<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name).ok_or_else(|| ErmError::InvalidParameter {
            name: "method",
            reason: format!(
                "'{name}' is not one of {}",
                Method::ALL.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
            ),
        })
    }

    /// False for the non-private baseline, whose result does not depend on epsilon.
    pub fn is_private(self) -> bool {
        self != Method::NonPrivate
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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

/// Everything the methods share: the model, the scaled rows, the constants and the optimum.
pub struct Problem {
    /// The model family.
    pub kind: ModelKind,
    /// The model.
    pub model: Box<dyn Model>,
    /// Training rows (private), scaled into the unit ball.
    pub train: TabularData,
    /// Test rows.
    pub test: TabularData,
    /// Hyperparameters.
    pub settings: Settings,
    /// G, L, Delta and the radius.
    pub constants: LossConstants,
    /// The non-private minimizer (the best found for the MLP).
    pub optimum: Vec<f64>,
    /// L* = F(optimum).
    pub l_star: f64,
    /// Where the training loops of input, dbdp and gradient sum their gradients.
    pub compute: Compute,
    /// H^{-1} at the optimum (DBDP-IF), computed on first use, or why it does not exist.
    inverse: OnceLock<std::result::Result<InverseHessian, String>>,
    /// The output-perturbation solver's (deterministic) output, computed on first use.
    descent: OnceLock<std::result::Result<Vec<f64>, String>>,
}

/// The value in `cell`, computed by `f` on first use; a failure refuses `method` with its reason.
fn cached<'a, T>(
    cell: &'a OnceLock<std::result::Result<T, String>>,
    method: &'static str,
    f: impl FnOnce() -> Result<T>,
) -> Result<&'a T> {
    cell.get_or_init(|| f().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|reason| ErmError::Refused { method, reason: reason.clone() })
}

impl Problem {
    /// Validates the settings and solves the non-private problem.
    pub fn new(kind: ModelKind, train: TabularData, test: TabularData, settings: Settings) -> Result<Problem> {
        settings.validate()?;
        if train.len() < 2 {
            return Err(ErmError::InvalidParameter { name: "training set", reason: "needs at least 2 rows".into() });
        }
        let model = kind.build(train.dim, train.classes.len());
        let constants = LossConstants::of(model.as_ref(), settings.lambda, settings.radius, MLP_RADIUS);
        let mut problem = Problem {
            kind,
            model,
            train,
            test,
            settings,
            constants,
            optimum: Vec::new(),
            l_star: 0.0,
            compute: Compute::Host,
            inverse: OnceLock::new(),
            descent: OnceLock::new(),
        };
        let start = problem.model.init(&mut NoiseRng::new(Some(0), 0));
        let objective = problem.objective();
        let optimum = problem.minimizer().minimize(|t| (objective.value(t), objective.gradient(t)), start)?;
        problem.l_star = objective.value(&optimum);
        problem.optimum = optimum;
        Ok(problem)
    }

    /// The same problem with its training loops' gradient sums on `compute`.
    pub fn with_compute(self, compute: Compute) -> Problem {
        Problem { compute, ..self }
    }

    /// The gradient sums over `data` (the training rows or a perturbed copy) where the problem
    /// computes them.
    pub fn rows<'a>(&'a self, data: &'a TabularData) -> Box<dyn RowSums + 'a> {
        self.compute.rows(self.kind, self.model.as_ref(), data)
    }

    /// F on the original training rows.
    pub fn objective(&self) -> Objective<'_> {
        Objective { model: self.model.as_ref(), data: &self.train, lambda: self.settings.lambda }
    }

    /// The minimizer of F on the parameter ball: accelerated to a gradient-mapping norm of 1e-10
    /// for the convex models; for the MLP, backtracking gradient descent to 1e-6 or 3,000
    /// iterations (L* is then the best loss found, not a certified minimum).
    pub fn minimizer(&self) -> Minimizer {
        let constants = self.constants.smoothness.zip(self.constants.strong_convexity);
        let (tolerance, max_iterations) = if constants.is_some() { (1e-10, 200_000) } else { (1e-6, 3_000) };
        Minimizer { constants, radius: Some(self.constants.radius), tolerance, max_iterations }
    }

    /// H^{-1} of F at the optimum, or the refusal of DBDP-IF when it does not exist.
    pub fn inverse_hessian(&self) -> Result<&InverseHessian> {
        cached(&self.inverse, "dbdp-if", || {
            let objective = self.objective();
            InverseHessian::at(&objective, &self.optimum).map_err(|e| {
                let stationarity = crate::linalg::norm(&objective.gradient(&self.optimum));
                ErmError::Numerical(format!("{e} (||grad F(theta~)|| = {stationarity:.1e})"))
            })
        })
    }

    /// The output of output perturbation's solver (the same for every run), before its noise.
    pub fn output_solution(&self, smoothness: f64) -> Result<&[f64]> {
        let objective = self.objective();
        cached(&self.descent, "output perturbation", || {
            gradient_descent(
                |t| objective.gradient(t),
                vec![0.0; self.model.dim()],
                1.0 / smoothness,
                output_perturbation::OUTPUT_ROUNDS,
                Some(self.constants.radius),
            )
        })
        .map(Vec::as_slice)
    }

    /// Seconds of one pass over the training rows (every row's loss gradient, where the problem
    /// computes them), timed at the optimum: the unit of [`cost`].
    pub fn pass_seconds(&self) -> f64 {
        let rows = self.rows(&self.train);
        (0..3)
            .map(|_| {
                let start = std::time::Instant::now();
                std::hint::black_box(rows.gradient_sum(&self.optimum, None, None));
                start.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    }

    /// The step size of the iterative methods.
    pub fn learning_rate(&self) -> f64 {
        self.settings.learning_rate.unwrap_or(match self.constants.smoothness {
            Some(l) => 1.0 / l,
            None => 0.5,
        })
    }
}

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
