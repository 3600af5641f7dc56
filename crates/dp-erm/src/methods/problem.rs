//! The prepared problem every method runs on: the model, the scaled rows, the loss constants and
//! the non-private optimum, computed once and shared.

use super::output_perturbation;
use super::settings::{MLP_RADIUS, Settings};
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
use dp_data::TabularData;
use std::sync::OnceLock;

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
    /// computes them), timed at the optimum: the unit of [`super::cost()`].
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
