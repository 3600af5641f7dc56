//! The papers' experiment (input perturbation's Figures 2-3, DBDP-ERM's Figure 1): every method at every
//! epsilon, repeated, summarized as mean and standard deviation of test accuracy and of the
//! optimality gap F(theta_priv) - L* on the training rows, each row with its guarantee label.

use crate::constants::LossConstants;
use crate::error::{ErmError, Result};
use crate::methods::{Method, Problem, Settings, run};
use crate::rng::NoiseRng;
use dp_accounting::Guarantee;
use dp_data::safe_files::{OWNER_ONLY, write_atomic};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

/// What to run.
pub struct Experiment<'a> {
    /// The prepared problem.
    pub problem: &'a Problem,
    /// Methods, in report order.
    pub methods: Vec<Method>,
    /// Privacy budgets.
    pub epsilons: Vec<f64>,
    /// Runs per (method, epsilon).
    pub repeats: usize,
    /// Seed for reproducible runs; `None` keys every run from the OS.
    pub seed: Option<u64>,
    /// Where to write each run's perturbed training set D_priv, if anywhere.
    pub private_data_dir: Option<PathBuf>,
}

/// One (method, epsilon) cell of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The method.
    pub method: Method,
    /// The budget (absent for the non-private baseline).
    pub epsilon: Option<f64>,
    /// The guarantee label of the claimed epsilon (absent when the cell was refused).
    pub guarantee: Option<Guarantee>,
    /// The accountant or theorem behind the claim.
    pub accountant: Option<String>,
    /// The epsilon the method claims (certified methods: what the accountant proves).
    pub claimed_epsilon: Option<f64>,
    /// Completed runs.
    pub runs: usize,
    /// Mean test accuracy.
    pub accuracy_mean: f64,
    /// Standard deviation of the test accuracy.
    pub accuracy_std: f64,
    /// Mean optimality gap F(theta_priv) - L*.
    pub gap_mean: f64,
    /// Standard deviation of the gap.
    pub gap_std: f64,
    /// Mean of the method's main noise standard deviation.
    pub noise_std: f64,
    /// Mean seconds per run.
    pub seconds: f64,
    /// Why the cell has no runs (the theorem's conditions fail), if it has none.
    pub refused: Option<String>,
    /// Notes from the first run.
    pub notes: Vec<String>,
}

/// The whole experiment's result.
#[derive(Debug, Clone, Serialize)]
pub struct ExperimentReport {
    /// The model's name.
    pub model: String,
    /// Training rows.
    pub train_rows: usize,
    /// Test rows.
    pub test_rows: usize,
    /// Features per row (intercept included).
    pub features: usize,
    /// Class names.
    pub classes: Vec<String>,
    /// Parameters of the model.
    pub parameters: usize,
    /// G, L, Delta and the radius.
    pub constants: LossConstants,
    /// Hyperparameters.
    pub settings: Settings,
    /// Where the training loops of input, dbdp and gradient ran.
    pub device: String,
    /// L* (the best found for the MLP).
    pub l_star: f64,
    /// Test accuracy of the non-private optimum.
    pub non_private_accuracy: f64,
    /// One row per (method, epsilon).
    pub rows: Vec<Row>,
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let var = if v.len() > 1 { v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64 } else { 0.0 };
    (m, var.sqrt())
}

impl Experiment<'_> {
    /// The (method, epsilon) cells in order; the non-private baseline has one cell.
    fn cells(&self) -> Vec<(Method, Option<f64>)> {
        self.methods
            .iter()
            .flat_map(|&m| {
                if m.is_private() { self.epsilons.iter().map(|&e| (m, Some(e))).collect() } else { vec![(m, None)] }
            })
            .collect()
    }

    /// Number of runs, for a progress bar.
    pub fn total_runs(&self) -> usize {
        self.cells().len() * self.repeats
    }

    /// Runs of `method`: one per epsilon and repeat (the non-private baseline's one cell, per
    /// repeat).
    pub fn runs_of(&self, method: Method) -> usize {
        self.cells().iter().filter(|(m, _)| *m == method).count() * self.repeats
    }

    /// Runs every cell; `progress` is told the cell of each run before it starts and how many
    /// runs are finished. A cell whose theorem refuses the setting is reported with the reason;
    /// any other error stops the experiment.
    pub fn run(&self, mut progress: impl FnMut(Method, Option<f64>, usize)) -> Result<ExperimentReport> {
        let problem = self.problem;
        let objective = problem.objective();
        let mut rows = Vec::new();
        let mut stream = 0u64;
        for (method, epsilon) in self.cells() {
            let (mut acc, mut gap, mut noise, mut secs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let mut first = None;
            let mut refused = None;
            for repeat in 0..self.repeats {
                progress(method, epsilon, stream as usize);
                stream += 1;
                let mut rng = NoiseRng::new(self.seed, stream);
                let start = Instant::now();
                let outcome = match run(problem, method, epsilon.unwrap_or(f64::INFINITY), &mut rng) {
                    Ok(o) => o,
                    Err(e @ (ErmError::Refused { .. } | ErmError::Accounting(_))) => {
                        refused = Some(e.to_string());
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                secs.push(start.elapsed().as_secs_f64());
                acc.push(objective.accuracy(&outcome.theta, &problem.test));
                gap.push(objective.value(&outcome.theta) - problem.l_star);
                noise.push(outcome.noise_std);
                if let (Some(dir), Some(data)) = (&self.private_data_dir, &outcome.private_data) {
                    let eps = epsilon.map_or("inf".to_string(), |e| e.to_string());
                    let path = dir.join(format!("{method}-eps{eps}-run{repeat}.csv"));
                    let fail = |reason: String| ErmError::Output { path: path.display().to_string(), reason };
                    let csv = data.to_csv().map_err(|e| fail(e.to_string()))?;
                    // The perturbed rows are the private data in another form: owner-only.
                    write_atomic(&path, &csv, OWNER_ONLY).map_err(|e| fail(e.to_string()))?;
                }
                first.get_or_insert(outcome);
            }
            let (accuracy_mean, accuracy_std) = mean_std(&acc);
            let (gap_mean, gap_std) = mean_std(&gap);
            let (guarantee, accountant, claimed) = match &first {
                Some(o) => (
                    Some(o.privacy.guarantee),
                    Some(o.privacy.accountant.clone()),
                    Some(o.privacy.epsilon).filter(|e| e.is_finite()),
                ),
                None => (None, None, None),
            };
            rows.push(Row {
                method,
                epsilon,
                guarantee,
                accountant,
                claimed_epsilon: claimed,
                runs: acc.len(),
                accuracy_mean,
                accuracy_std,
                gap_mean,
                gap_std,
                noise_std: mean_std(&noise).0,
                seconds: mean_std(&secs).0,
                refused: if acc.is_empty() { refused } else { None },
                notes: first.map(|o| o.notes).unwrap_or_default(),
            });
        }
        Ok(ExperimentReport {
            model: problem.model.name().to_string(),
            train_rows: problem.train.len(),
            test_rows: problem.test.len(),
            features: problem.train.dim,
            classes: problem.train.classes.clone(),
            parameters: problem.model.dim(),
            constants: problem.constants,
            settings: problem.settings.clone(),
            device: problem.compute.describe(),
            l_star: problem.l_star,
            non_private_accuracy: objective.accuracy(&problem.optimum, &problem.test),
            rows,
        })
    }
}

impl ExperimentReport {
    /// The table as CSV (one line per cell).
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "method,epsilon,guarantee,accountant,claimed_epsilon,runs,accuracy_mean,accuracy_std,gap_mean,gap_std,noise_std,seconds,refused\n",
        );
        for r in &self.rows {
            let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
            let refused = r.refused.as_deref().unwrap_or("").replace('"', "'");
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},\"{}\"\n",
                r.method,
                opt(r.epsilon),
                r.guarantee.map_or(String::new(), |g| g.to_string()),
                r.accountant.as_deref().unwrap_or(""),
                opt(r.claimed_epsilon),
                r.runs,
                r.accuracy_mean,
                r.accuracy_std,
                r.gap_mean,
                r.gap_std,
                r.noise_std,
                r.seconds,
                refused
            ));
        }
        out
    }

    /// The table for a terminal: accuracy and gap as mean +- std, every row with its label.
    pub fn to_table(&self) -> String {
        let mut out = format!(
            "{:<12} {:>8} {:<12} {:>18} {:>22} {:>11}  {}\n",
            "method", "epsilon", "guarantee", "test accuracy (%)", "optimality gap", "noise std", "accountant"
        );
        for r in &self.rows {
            let eps = r.epsilon.map_or("-".to_string(), |e| format!("{e}"));
            if let Some(reason) = &r.refused {
                out.push_str(&format!("{:<12} {:>8} {:<12} {}\n", r.method.name(), eps, "refused", reason));
                continue;
            }
            out.push_str(&format!(
                "{:<12} {:>8} {:<12} {:>9.2} +- {:<5.2} {:>11.3e} +- {:<8.1e} {:>11.3e}  {}\n",
                r.method.name(),
                eps,
                r.guarantee.map_or(String::new(), |g| g.to_string()),
                100.0 * r.accuracy_mean,
                100.0 * r.accuracy_std,
                r.gap_mean,
                r.gap_std,
                r.noise_std,
                r.accountant.as_deref().unwrap_or("")
            ));
        }
        out
    }
}
