//! The privacy of a hyper-parameter search, and the noise that keeps it within a total budget.
//! A candidate is one training (the Gaussian mechanism on Poisson-sampled lots, `steps` times, at
//! its own rate and noise multiplier) and, when its score is computed on private held-out data,
//! the score's own release (a Gaussian noisy count of correct predictions: sensitivity 1). The
//! candidate's hyper-parameters are drawn without looking at the data, so one candidate is
//! `AnyOf` the configurations; the search releases the best of a random number of candidates
//! (`RepeatAndSelect`). Calibration gives every configuration the noise multiplier of one common
//! per-candidate epsilon, the largest whose search still meets the total target.

use crate::accountant::Accountant;
use crate::calibrate::calibrate_noise_multiplier;
use crate::error::{AccountingError, Result};
use crate::event::{DpEvent, LotSampling};
use crate::ledger::PrivacyLedger;
use crate::rdp::RdpAccountant;
use crate::repeat_and_select::Repetitions;
use crate::report::PrivacyReport;
use crate::validate;

/// The noise multiplier that stands for "no noise budget spent on training" when the smallest
/// feasible total is computed.
const HUGE_NOISE: f64 = 1e6;

/// What one configuration's training is, apart from its noise.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TrainingShape {
    /// Poisson sampling rate q.
    pub sample_rate: f64,
    /// Steps.
    pub steps: u64,
}

impl TrainingShape {
    /// Whether `ledger`, what a candidate's run recorded, is within the training this shape
    /// accounts for at noise multiplier `z`: every release a Poisson-sampled Gaussian at a rate
    /// of at most this one and a multiplier of at least `z`, in at most this many steps (each of
    /// which only lowers the privacy loss). Otherwise, what differs, in one line.
    pub fn admits(&self, z: f64, ledger: &PrivacyLedger) -> std::result::Result<(), String> {
        let mut steps = 0u64;
        for (times, part) in ledger.event().parts() {
            let within = match part {
                DpEvent::PoissonSampled { sample_rate, of } => match of.as_ref() {
                    DpEvent::Gaussian { noise_multiplier } => {
                        if *sample_rate > self.sample_rate {
                            return Err(format!(
                                "sampling rate {sample_rate} above the accounted {}",
                                self.sample_rate
                            ));
                        }
                        if *noise_multiplier < z {
                            return Err(format!("noise multiplier {noise_multiplier} below the accounted {z}"));
                        }
                        true
                    }
                    _ => false,
                },
                _ => false,
            };
            if !within {
                return Err(format!(
                    "a {} release where the search accounted Poisson-sampled Gaussian steps",
                    part.kind()
                ));
            }
            steps = steps.saturating_add(times);
        }
        if steps > self.steps {
            return Err(format!("{steps} steps where the search accounted {}", self.steps));
        }
        Ok(())
    }
}

/// The event of one candidate of `shapes` at their noise multipliers `z`, with the score's
/// Gaussian release at `score_noise` (over sensitivity 1) when the score is private.
pub fn candidate_event(shapes: &[TrainingShape], z: &[f64], score_noise: Option<f64>) -> Result<DpEvent> {
    if shapes.is_empty() || shapes.len() != z.len() {
        return Err(AccountingError::Unsupported(format!(
            "{} configurations for {} noise multipliers",
            shapes.len(),
            z.len()
        )));
    }
    // The worst of equal trainings is one of them: each distinct training is kept once.
    let mut trainings: Vec<DpEvent> = Vec::new();
    for (s, &z) in shapes.iter().zip(z) {
        let training = DpEvent::sampled_gaussian(z, s.sample_rate, LotSampling::Poisson)?.repeated(s.steps)?;
        if !trainings.contains(&training) {
            trainings.push(training);
        }
    }
    let training = match <[DpEvent; 1]>::try_from(trainings) {
        Ok([one]) => one,
        Err(events) => DpEvent::AnyOf { events },
    };
    Ok(match score_noise {
        None => training,
        Some(sigma) => DpEvent::Composed {
            events: vec![training, DpEvent::Gaussian { noise_multiplier: validate::noise_multiplier(sigma)? }],
        },
    })
}

/// The privacy of the search (the RDP accountant's, the only one with a theorem for it).
pub fn search_privacy(candidate: DpEvent, repetitions: Repetitions, delta: f64) -> Result<PrivacyReport> {
    let mut ledger = PrivacyLedger::new();
    ledger
        .record_event(DpEvent::RepeatAndSelect { repetitions: repetitions.validate()?, of: Box::new(candidate) }, 1)?;
    RdpAccountant::default().epsilon(&ledger, delta)
}

/// A search calibrated to its total budget.
#[derive(Debug, Clone)]
pub struct SearchCalibration {
    /// Each configuration's noise multiplier.
    pub noise_multipliers: Vec<f64>,
    /// The epsilon each candidate alone spends (at the same delta).
    pub candidate_epsilon: f64,
    /// The whole search's privacy, at most the target.
    pub report: PrivacyReport,
}

/// The noise multipliers of `shapes` that keep the search (candidates drawn by `repetitions`,
/// scores released at `score_noise`) within `target_epsilon` at `delta`: refused, with the
/// smallest total the search can have, when even training noise at 1e6 cannot meet it.
pub fn calibrate_search(
    shapes: &[TrainingShape],
    score_noise: Option<f64>,
    repetitions: Repetitions,
    target_epsilon: f64,
    delta: f64,
) -> Result<SearchCalibration> {
    let target = validate::epsilon(target_epsilon)?;
    let total = |z: &[f64]| search_privacy(candidate_event(shapes, z, score_noise)?, repetitions, delta);
    let floor = total(&vec![HUGE_NOISE; shapes.len()])?.epsilon;
    if floor >= target {
        return Err(AccountingError::Unreachable(format!(
            "a total epsilon of {target} is too small for this search: its score releases and the number of candidates alone spend {floor:.4} (raise the target, the score's noise, or score on public data)"
        )));
    }
    let rdp = RdpAccountant::default();
    // Configurations that share a shape share its calibration (a space of thousands of
    // configurations often has a handful of shapes): each distinct shape is calibrated once.
    let mut distinct: Vec<TrainingShape> = Vec::new();
    let index: Vec<usize> = shapes
        .iter()
        .map(|s| match distinct.iter().position(|d| d == s) {
            Some(i) => i,
            None => {
                distinct.push(*s);
                distinct.len() - 1
            }
        })
        .collect();
    let at = |eps: f64| -> Result<Vec<f64>> {
        let z = distinct
            .iter()
            .map(|s| Ok(calibrate_noise_multiplier(&rdp, eps, delta, s.sample_rate, s.steps)?.noise_multiplier))
            .collect::<Result<Vec<f64>>>()?;
        Ok(index.iter().map(|&i| z[i]).collect())
    };
    // The per-candidate epsilon: at most the total, bisected in log space (the total grows with it).
    let (mut low, mut high) = (target * 1e-4, target);
    let mut best: Option<(f64, Vec<f64>, PrivacyReport)> = None;
    for _ in 0..40 {
        let mid = (low * high).sqrt();
        let z = at(mid)?;
        let report = total(&z)?;
        if report.epsilon <= target {
            best = Some((mid, z, report));
            low = mid;
        } else {
            high = mid;
        }
        if high / low < 1.0 + 1e-4 {
            break;
        }
    }
    let (candidate_epsilon, noise_multipliers, report) = best.ok_or_else(|| {
        AccountingError::Unsupported(format!(
            "no per-candidate epsilon above {:.2e} meets a total of {target}",
            target * 1e-4
        ))
    })?;
    Ok(SearchCalibration { noise_multipliers, candidate_epsilon, report })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Guarantee;

    #[test]
    fn a_calibrated_search_meets_its_target_certified_and_costs_more_than_one_candidate() {
        let shapes = [
            TrainingShape { sample_rate: 256.0 / 60000.0, steps: 470 },
            TrainingShape { sample_rate: 1024.0 / 60000.0, steps: 235 },
        ];
        let repetitions = Repetitions::TruncatedNegativeBinomial { shape: 1.0, mean: 5.0 };
        let c = calibrate_search(&shapes, Some(20.0), repetitions, 3.0, 1e-5).unwrap();
        assert!(c.report.epsilon <= 3.0 && c.report.epsilon > 2.9, "{}", c.report);
        assert_eq!(c.report.guarantee, Guarantee::Certified);
        assert!(c.candidate_epsilon < 3.0 / 1.5, "a search costs well over one candidate: {}", c.candidate_epsilon);
        for (s, z) in shapes.iter().zip(&c.noise_multipliers) {
            let one = RdpAccountant::default()
                .epsilon(&PrivacyLedger::homogeneous(*z, s.sample_rate, s.steps).unwrap(), 1e-5)
                .unwrap();
            assert!(
                (one.epsilon - c.candidate_epsilon).abs() < 1e-3 * c.candidate_epsilon,
                "{one} vs {}",
                c.candidate_epsilon
            );
        }
        // A single candidate's training is recomputed from its parts: the same total.
        let again =
            search_privacy(candidate_event(&shapes, &c.noise_multipliers, Some(20.0)).unwrap(), repetitions, 1e-5)
                .unwrap();
        assert_eq!(again.epsilon, c.report.epsilon);
    }

    #[test]
    fn configurations_sharing_a_shape_calibrate_as_one() {
        let shapes = [TrainingShape { sample_rate: 0.01, steps: 300 }, TrainingShape { sample_rate: 0.02, steps: 150 }];
        let repetitions = Repetitions::TruncatedNegativeBinomial { shape: 1.0, mean: 4.0 };
        let two = calibrate_search(&shapes, Some(20.0), repetitions, 2.0, 1e-5).unwrap();
        let many: Vec<TrainingShape> = (0..5000).map(|i| shapes[i % 2]).collect();
        let all = calibrate_search(&many, Some(20.0), repetitions, 2.0, 1e-5).unwrap();
        assert_eq!(all.report.epsilon, two.report.epsilon);
        assert!(all.noise_multipliers.iter().enumerate().all(|(i, z)| *z == two.noise_multipliers[i % 2]));
    }

    #[test]
    fn a_ledger_is_admitted_only_within_the_training_it_was_accounted_as() {
        let shape = TrainingShape { sample_rate: 0.05, steps: 60 };
        let ledger = |z: f64, q: f64, steps: u64| PrivacyLedger::homogeneous(z, q, steps).unwrap();
        assert_eq!(shape.admits(1.8, &ledger(1.8, 0.05, 60)), Ok(()));
        assert_eq!(shape.admits(1.8, &ledger(2.0, 0.04, 10)), Ok(()), "less noise spent is within");
        let refused = |l: &PrivacyLedger, why: &str| {
            let err = shape.admits(1.8, l).unwrap_err();
            assert!(err.contains(why), "{err}");
        };
        refused(&ledger(1.8, 0.125, 24), "sampling rate 0.125");
        refused(&ledger(1.8, 0.05, 90), "90 steps");
        refused(&ledger(1.7, 0.05, 60), "noise multiplier 1.7");
        let mut shuffled = PrivacyLedger::new();
        shuffled.record_event(DpEvent::sampled_gaussian(1.8, 0.05, LotSampling::Shuffled).unwrap(), 60).unwrap();
        refused(&shuffled, "a shuffled release");
        let mut none = PrivacyLedger::new();
        none.record_event(DpEvent::NonPrivate { what: "gradient".into() }, 60).unwrap();
        refused(&none, "a non-private release");
    }

    #[test]
    fn a_budget_too_small_for_the_scores_alone_is_refused_with_the_smallest_total() {
        let shapes = [TrainingShape { sample_rate: 0.01, steps: 100 }];
        let repetitions = Repetitions::Poisson { mean: 10.0 };
        let err = calibrate_search(&shapes, Some(0.5), repetitions, 0.5, 1e-5).unwrap_err().to_string();
        assert!(err.contains("too small for this search") && err.lines().count() == 1, "{err}");
        assert!(calibrate_search(&[], None, repetitions, 1.0, 1e-5).is_err());
    }
}
