//! One audit: a mechanism at a budget, trained `repeats` times with fresh canaries, each training
//! run giving its own one-run lower bound on epsilon beside the epsilon the method claims.

use crate::canaries::{coin_flips, mislabeled, with_canaries};
use crate::guesses::{OneRunBound, one_run_bound};
use dp_accounting::Guarantee;
use dp_data::TabularData;
use dp_erm::methods::{GradientCanaries, dp_sgd, run};
use dp_erm::rng::NoiseRng;
use dp_erm::{ErmError, Method, ModelKind, Problem, Result, Settings};
use serde::Serialize;
use std::time::Instant;

/// What the auditor plants and observes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CanaryKind {
    /// Dirac gradient canaries in DP-SGD, scored by the released noisy sums of every step.
    WhiteBox,
    /// Mislabeled rows, scored by minus their loss under the released model.
    BlackBox,
}

/// What to audit.
pub struct Audit<'a> {
    /// Model family.
    pub kind: ModelKind,
    /// Training rows (the canaries are added to them).
    pub train: &'a TabularData,
    /// Test rows (for the problem's accuracy; not used by the audit).
    pub test: &'a TabularData,
    /// The method's hyperparameters (delta is the delta of the bound).
    pub settings: Settings,
    /// The mechanism.
    pub method: Method,
    /// The budget it is run at (ignored by non-private).
    pub epsilon: f64,
    /// Canaries m per training run.
    pub canaries: usize,
    /// White-box or black-box canaries.
    pub canary_kind: CanaryKind,
    /// Confidence of each lower bound.
    pub confidence: f64,
    /// Training runs, each a separate audit.
    pub repeats: usize,
    /// Seed for reproducible audits.
    pub seed: Option<u64>,
}

/// The audit's result.
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    /// The mechanism.
    pub method: Method,
    /// The canaries.
    pub canary_kind: CanaryKind,
    /// The requested budget (absent for non-private).
    pub epsilon: Option<f64>,
    /// The epsilon the method claims, with its label and accountant.
    pub claimed_epsilon: f64,
    /// The claim's guarantee label.
    pub guarantee: Guarantee,
    /// The accountant or theorem behind the claim.
    pub accountant: String,
    /// delta of the claim and of the bound.
    pub delta: f64,
    /// Confidence of each bound.
    pub confidence: f64,
    /// One bound per training run.
    pub runs: Vec<OneRunBound>,
    /// The largest lower bound over the runs: each holds at `confidence` on its own, their
    /// maximum at 1 - repeats (1 - confidence) (union bound).
    pub max_lower_bound: f64,
    /// Seconds per training run (audit included).
    pub seconds: f64,
}

impl Audit<'_> {
    /// Runs the audit; `progress` is called after each training run.
    pub fn run(&self, mut progress: impl FnMut()) -> Result<AuditReport> {
        let white = self.canary_kind == CanaryKind::WhiteBox;
        if white && !matches!(self.method, Method::Gradient | Method::NonPrivate) {
            return Err(ErmError::InvalidParameter {
                name: "canaries",
                reason: format!("white-box gradient canaries audit gradient and non-private, not {}", self.method),
            });
        }
        let invalid = |name, reason: String| Err(ErmError::InvalidParameter { name, reason });
        if self.canaries < 2 {
            return invalid("canaries", format!("{} given; the audit needs at least 2", self.canaries));
        }
        if self.repeats == 0 {
            return invalid("repeats", "must be at least 1".into());
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return invalid("confidence", format!("{} must lie in (0, 1)", self.confidence));
        }
        let epsilon = if self.method.is_private() { self.epsilon } else { f64::INFINITY };
        let shared = if white {
            Some(Problem::new(self.kind, self.train.clone(), self.test.clone(), self.settings.clone())?)
        } else {
            None
        };
        let (mut runs, mut claim) = (Vec::new(), None);
        let start = Instant::now();
        for repeat in 0..self.repeats {
            let mut rng = NoiseRng::new(self.seed, 1000 + repeat as u64);
            let included = coin_flips(self.canaries, &mut rng);
            let (outcome, scores) = match &shared {
                Some(problem) => {
                    let mut canaries = GradientCanaries::new(included.clone());
                    let outcome = dp_sgd(problem, epsilon, &mut rng, Some(&mut canaries))?;
                    (outcome, canaries.scores)
                }
                None => {
                    let canaries = mislabeled(self.train, self.canaries, &mut rng);
                    let train = with_canaries(self.train, &canaries, &included);
                    let problem = Problem::new(self.kind, train, self.test.clone(), self.settings.clone())?;
                    let outcome = run(&problem, self.method, epsilon, &mut rng)?;
                    let scores = (0..canaries.len())
                        .map(|i| -problem.model.loss(&outcome.theta, canaries.row(i), canaries.labels[i]))
                        .collect();
                    (outcome, scores)
                }
            };
            runs.push(one_run_bound(&scores, &included, self.settings.delta, self.confidence));
            claim.get_or_insert(outcome.privacy);
            progress();
        }
        let claim = claim.expect("at least one run");
        Ok(AuditReport {
            method: self.method,
            canary_kind: self.canary_kind,
            epsilon: self.method.is_private().then_some(self.epsilon),
            claimed_epsilon: claim.epsilon,
            guarantee: claim.guarantee,
            accountant: claim.accountant,
            delta: self.settings.delta,
            confidence: self.confidence,
            max_lower_bound: runs.iter().map(|r| r.epsilon).fold(0.0, f64::max),
            seconds: start.elapsed().as_secs_f64() / self.repeats as f64,
            runs,
        })
    }
}
