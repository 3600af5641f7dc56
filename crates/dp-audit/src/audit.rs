//! One audit: a mechanism at a budget, either trained `repeats` times with fresh canaries, each
//! training run giving its own one-run lower bound on epsilon, or trained many times with and
//! without one canary (the classic audit); beside the epsilon the method claims.

use crate::canaries::{coin_flips, least_variance, out_of_distribution, widened, with_canaries};
use crate::many_runs::{ManyRunBound, many_run_bound};
use dp_accounting::audit::guesses::{OneRunBound, one_run_bound};
use dp_accounting::{Guarantee, PrivacyReport};
use dp_data::TabularData;
use dp_erm::methods::{GradientCanaries, dp_sgd, run};
use dp_erm::rng::NoiseRng;
use dp_erm::{ErmError, Method, ModelKind, Outcome, Problem, Result, Settings};
use serde::Serialize;
use std::time::Instant;

/// The most values (f64) the canaries of one audit may make the data hold (8 GiB): larger
/// audits are refused from arithmetic before anything is allocated.
const MAX_AUDIT_VALUES: usize = 1 << 30;

/// What the auditor plants and observes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CanaryKind {
    /// Dirac gradient canaries in DP-SGD, scored by the released noisy sums of every step.
    WhiteBox,
    /// Rows scored by minus their loss under the released model: out-of-distribution rows (a
    /// feature of their own each) in the one-run audit, the least-variance row in the many-run one.
    BlackBox,
}

/// How the training runs are spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Design {
    /// `repeats` training runs, each with `canaries` canaries and its own one-run bound.
    OneRun {
        /// Canaries m per training run.
        canaries: usize,
        /// Training runs, each a separate audit.
        repeats: usize,
    },
    /// `runs` training runs without and `runs` with one canary, one bound from all of them.
    ManyRuns {
        /// Runs per world.
        runs: usize,
    },
}

impl Design {
    /// Training runs the design costs.
    pub fn trainings(self) -> usize {
        match self {
            Design::OneRun { repeats, .. } => repeats,
            Design::ManyRuns { runs } => 2 * runs,
        }
    }
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
    /// One-run or many-run.
    pub design: Design,
    /// White-box or black-box canaries.
    pub canary_kind: CanaryKind,
    /// Confidence of each lower bound.
    pub confidence: f64,
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
    /// One-run design: one bound per training run (empty for the many-run design).
    pub runs: Vec<OneRunBound>,
    /// Many-run design: its one bound.
    pub many_runs: Option<ManyRunBound>,
    /// The largest lower bound that holds at `confidence` for the audit as a whole: for one-run
    /// audits, each run's bound recomputed at 1 - (1 - confidence) / repeats (Bonferroni) and
    /// maximised; the verdict on the claim rests on it.
    pub max_lower_bound: f64,
    /// Training runs the method refused (each counts as an output: no guesses in a one-run
    /// audit, score minus infinity in a many-run one).
    pub refused_runs: usize,
    /// Seconds per training run (audit included).
    pub seconds: f64,
}

impl Audit<'_> {
    /// Checks the audit's parameters (cheap: callers running several audits check them all
    /// before the first trains).
    pub fn validate(&self) -> Result<()> {
        let white = self.canary_kind == CanaryKind::WhiteBox;
        let invalid = |name, reason: String| Err(ErmError::InvalidParameter { name, reason });
        if white && !matches!(self.method, Method::Gradient | Method::NonPrivate) {
            return invalid(
                "canaries",
                format!("white-box gradient canaries audit gradient and non-private, not {}", self.method),
            );
        }
        match self.design {
            Design::OneRun { canaries, .. } if canaries < 2 => {
                return invalid("canaries", format!("{canaries} given; the audit needs at least 2"));
            }
            Design::OneRun { repeats: 0, .. } => return invalid("repeats", "must be at least 1".into()),
            Design::OneRun { canaries, .. } => {
                // Black-box canaries are records with a feature each: the widened table has
                // (N + m) x (d + m) values; white-box ones a score and a noise draw each.
                let values = if white {
                    Some(canaries)
                } else {
                    let (n, d) = (self.train.len(), self.train.dim);
                    n.checked_add(canaries).zip(d.checked_add(canaries)).and_then(|(r, c)| r.checked_mul(c))
                };
                if values.is_none_or(|v| v > MAX_AUDIT_VALUES) {
                    return invalid(
                        "canaries",
                        format!("{canaries} canaries need more than the {MAX_AUDIT_VALUES} values an audit may hold"),
                    );
                }
            }
            Design::ManyRuns { runs } if runs < 2 => {
                return invalid("runs", format!("{runs} given; the audit needs at least 2 per world"));
            }
            _ => {}
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return invalid("confidence", format!("{} must lie in (0, 1)", self.confidence));
        }
        Ok(())
    }

    /// Runs the audit; `progress` is called after each training run.
    pub fn run(&self, progress: impl FnMut()) -> Result<AuditReport> {
        self.validate()?;
        let start = Instant::now();
        let mut tally = Tally::default();
        let (runs, many, max_lower_bound) = match self.design {
            Design::OneRun { canaries, repeats } => {
                let (runs, joint) = self.one_run(canaries, repeats, &mut tally, progress)?;
                (runs, None, joint)
            }
            Design::ManyRuns { runs } => {
                let bound = self.many_runs(runs, &mut tally, progress)?;
                (Vec::new(), Some(bound), bound.epsilon)
            }
        };
        let Some(claim) = tally.claim else {
            return Err(tally.refusal.expect("every run either finished or was refused"));
        };
        Ok(AuditReport {
            method: self.method,
            canary_kind: self.canary_kind,
            epsilon: self.method.is_private().then_some(self.epsilon),
            claimed_epsilon: claim.epsilon,
            guarantee: claim.guarantee,
            accountant: claim.accountant,
            delta: self.settings.delta,
            confidence: self.confidence,
            runs,
            many_runs: many,
            max_lower_bound,
            refused_runs: tally.refused,
            seconds: start.elapsed().as_secs_f64() / self.design.trainings() as f64,
        })
    }

    /// The budget the mechanism runs at: infinite (no noise) for non-private.
    fn budget(&self) -> f64 {
        if self.method.is_private() { self.epsilon } else { f64::INFINITY }
    }

    /// A problem on `train` with the audit's model, test rows and settings.
    fn problem(&self, train: TabularData, test: TabularData) -> Result<Problem> {
        Problem::new(self.kind, train, test, self.settings.clone())
    }

    /// `repeats` one-run audits with `m` canaries each: their bounds at the audit's confidence (0
    /// for a refused run), and the largest of them at the Bonferroni-corrected confidence.
    fn one_run(
        &self,
        m: usize,
        repeats: usize,
        tally: &mut Tally,
        mut progress: impl FnMut(),
    ) -> Result<(Vec<OneRunBound>, f64)> {
        let joint = 1.0 - (1.0 - self.confidence) / repeats as f64;
        let mut largest = 0.0f64;
        let white = self.canary_kind == CanaryKind::WhiteBox;
        let shared = if white { Some(self.problem(self.train.clone(), self.test.clone())?) } else { None };
        let mut runs = Vec::new();
        for repeat in 0..repeats {
            let mut rng = NoiseRng::new(self.seed, 1000 + repeat as u64);
            let included = coin_flips(m, &mut rng);
            let scores = match &shared {
                Some(problem) => {
                    let mut canaries = GradientCanaries::new(included.clone());
                    let outcome = dp_sgd(problem, self.budget(), &mut rng, Some(&mut canaries));
                    tally.take(outcome)?.map(|_| canaries.scores)
                }
                None => {
                    let canaries = out_of_distribution(self.train, m, &mut rng);
                    let train = with_canaries(&widened(self.train, m), &canaries, &included);
                    let problem = self.problem(train, widened(self.test, m))?;
                    let outcome = tally.take(run(&problem, self.method, self.budget(), &mut rng))?;
                    outcome.map(|o| (0..m).map(|i| black_box_score(&problem, &o, &canaries, i)).collect::<Vec<_>>())
                }
            };
            runs.push(match scores {
                Some(scores) => {
                    largest = largest.max(one_run_bound(&scores, &included, self.settings.delta, joint).epsilon);
                    one_run_bound(&scores, &included, self.settings.delta, self.confidence)
                }
                None => OneRunBound { canaries: m as u64, guesses: 0, correct: 0, epsilon: 0.0 },
            });
            progress();
        }
        Ok((runs, largest))
    }

    /// `runs` trainings without and `runs` with one canary (alternating); the bound. A refused
    /// run is an output like any other: its score is minus infinity.
    fn many_runs(&self, runs: usize, tally: &mut Tally, mut progress: impl FnMut()) -> Result<ManyRunBound> {
        let white = self.canary_kind == CanaryKind::WhiteBox;
        let without = self.problem(self.train.clone(), self.test.clone())?;
        let with = if white {
            None
        } else {
            let canary = least_variance(self.train, |x, y| without.model.loss(&without.optimum, x, y))?;
            Some((self.problem(with_canaries(self.train, &canary, &[true]), self.test.clone())?, canary))
        };
        let mut scores = [Vec::new(), Vec::new()];
        for i in 0..2 * runs {
            let inside = i % 2 == 1;
            let mut rng = NoiseRng::new(self.seed, 1_000_000 + i as u64);
            let score = match &with {
                None => {
                    let mut canaries = GradientCanaries::new(vec![inside]);
                    let outcome = dp_sgd(&without, self.budget(), &mut rng, Some(&mut canaries));
                    tally.take(outcome)?.map(|_| canaries.scores[0])
                }
                Some((with, canary)) => {
                    let problem = if inside { with } else { &without };
                    let outcome = tally.take(run(problem, self.method, self.budget(), &mut rng))?;
                    outcome.map(|o| black_box_score(problem, &o, canary, 0))
                }
            };
            scores[usize::from(inside)].push(score.unwrap_or(f64::NEG_INFINITY));
            progress();
        }
        Ok(many_run_bound(&scores[0], &scores[1], self.settings.delta, self.confidence))
    }
}

/// The black-box score of canary `i`: minus its loss under the released model (higher: more
/// likely trained on).
fn black_box_score(problem: &Problem, outcome: &Outcome, canaries: &TabularData, i: usize) -> f64 {
    -problem.model.loss(&outcome.theta, canaries.row(i), canaries.labels[i])
}

/// What the training runs of an audit said besides their scores: the method's claim (from the
/// first run that finished) and the runs it refused.
#[derive(Default)]
struct Tally {
    claim: Option<PrivacyReport>,
    refused: usize,
    refusal: Option<ErmError>,
}

impl Tally {
    /// The outcome of a run; None when the method refused it (the refusal is counted), an error
    /// for any other failure.
    fn take(&mut self, result: Result<Outcome>) -> Result<Option<Outcome>> {
        match result {
            Ok(outcome) => {
                self.claim.get_or_insert_with(|| outcome.privacy.clone());
                Ok(Some(outcome))
            }
            Err(refusal @ ErmError::Refused { .. }) => {
                self.refused += 1;
                self.refusal = Some(refusal);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}
