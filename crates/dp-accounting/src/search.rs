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
use crate::rdp_accountant::RdpAccountant;
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
    let trainings = shapes
        .iter()
        .zip(z)
        .map(|(s, &z)| DpEvent::sampled_gaussian(z, s.sample_rate, LotSampling::Poisson)?.repeated(s.steps))
        .collect::<Result<Vec<_>>>()?;
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
    let at = |eps: f64| -> Result<Vec<f64>> {
        shapes
            .iter()
            .map(|s| Ok(calibrate_noise_multiplier(&rdp, eps, delta, s.sample_rate, s.steps)?.noise_multiplier))
            .collect()
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
    fn a_budget_too_small_for_the_scores_alone_is_refused_with_the_smallest_total() {
        let shapes = [TrainingShape { sample_rate: 0.01, steps: 100 }];
        let repetitions = Repetitions::Poisson { mean: 10.0 };
        let err = calibrate_search(&shapes, Some(0.5), repetitions, 0.5, 1e-5).unwrap_err().to_string();
        assert!(err.contains("too small for this search") && err.lines().count() == 1, "{err}");
        assert!(calibrate_search(&[], None, repetitions, 1.0, 1e-5).is_err());
    }
}
