//! A hyper-parameter search whose privacy is accounted (Papernot & Steinke, ICLR 2022): the
//! number of candidates K is drawn from the run's CSPRNG (ChaCha20, keyed by the OS, or by the
//! seed of a reproducible search), each candidate's configuration is drawn uniformly from the
//! space, each trains with the noise that keeps the whole search within its total budget
//! (`dp_accounting::search::calibrate_search`), its score is released through a Gaussian noisy
//! count when it is computed on private held-out data, and only the best candidate comes back,
//! with the search's epsilon. K and the other candidates are the mechanism's internal state:
//! publishing them voids the bound, and they are not in what comes back.

use dp_accounting::PrivacyReport;
use dp_accounting::repeat_and_select::{MAX_MEAN, Repetitions};
use dp_accounting::search::{TrainingShape, calibrate_search};
use dp_data::ChaChaState;
use dp_engine::error::{EngineError, Result};
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rand_distr::StandardNormal;

/// The ChaCha20 stream of a search's draws (K, the configurations, the scores' noise).
pub const SEARCH_STREAM: u64 = 5;

/// How a candidate's score is computed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Score {
    /// On public data (a held-out set no one's privacy covers): released as is, free.
    Public,
    /// On `held_out` private examples: the count of correct predictions plus Gaussian noise of
    /// standard deviation `noise_multiplier` (the count's sensitivity is 1), over `held_out`.
    Private {
        /// The noise's standard deviation, in correct predictions.
        noise_multiplier: f64,
        /// The public number of held-out examples.
        held_out: usize,
    },
}

/// What determines a search's privacy.
#[derive(Debug, Clone, Copy)]
pub struct SearchSettings {
    /// How K is drawn.
    pub repetitions: Repetitions,
    /// The whole search's epsilon.
    pub target_epsilon: f64,
    /// Its delta.
    pub delta: f64,
    /// How the candidates are scored.
    pub score: Score,
    /// The seed of a reproducible search (its draws are then only as secret as the seed).
    pub seed: Option<u64>,
}

/// What one candidate's training gives: its result and its correct predictions on the
/// held-out examples (private or public).
#[derive(Debug, Clone)]
pub struct Trained<T> {
    /// The candidate's result (a model, a report).
    pub value: T,
    /// Correct predictions on the held-out examples.
    pub correct: usize,
    /// The held-out examples evaluated.
    pub evaluated: usize,
}

/// The released outcome of a search: the best candidate's configuration, result and (noisy)
/// score, and the whole search's privacy; nothing when Poisson drew no candidate.
#[derive(Debug, Clone)]
pub struct Searched<C, T> {
    /// The chosen candidate: its configuration, result and released score.
    pub chosen: Option<(C, T, f64)>,
    /// The search's privacy (RDP accountant; certified when its candidates are).
    pub privacy: PrivacyReport,
}

/// The most candidates a search runs: refused beyond (a heavy tail drawn from an absurd mean).
const MAX_CANDIDATES: u64 = 100_000;

/// Runs the search over `configs` (each one's training shape given by `shape_of`) under
/// `settings`: `train` trains one candidate at the noise multiplier it is given.
pub fn search<C: Clone, T>(
    configs: &[C],
    shape_of: impl Fn(&C) -> TrainingShape,
    settings: &SearchSettings,
    mut train: impl FnMut(&C, f64) -> Result<Trained<T>>,
) -> Result<Searched<C, T>> {
    if configs.is_empty() {
        return Err(EngineError::invalid("search space", "holds no candidate"));
    }
    let shapes: Vec<TrainingShape> = configs.iter().map(shape_of).collect();
    let score_noise = match settings.score {
        Score::Public => None,
        Score::Private { noise_multiplier, .. } => Some(noise_multiplier),
    };
    let calibrated =
        calibrate_search(&shapes, score_noise, settings.repetitions, settings.target_epsilon, settings.delta)?;
    let mut rng = ChaChaState::new(settings.seed, SEARCH_STREAM).restore();
    let k = candidates(settings.repetitions, &mut rng)?;
    let mut best: Option<(C, T, f64)> = None;
    for _ in 0..k {
        let i = rng.random_range(0..configs.len());
        let trained = train(&configs[i], calibrated.noise_multipliers[i])?;
        let score = released_score(&trained, settings.score, &mut rng)?;
        if best.as_ref().is_none_or(|(_, _, s)| score > *s) {
            best = Some((configs[i].clone(), trained.value, score));
        }
    }
    Ok(Searched { chosen: best, privacy: calibrated.report })
}

/// K, drawn by inverting its distribution function at a uniform draw of `rng`.
pub(crate) fn candidates(repetitions: Repetitions, rng: &mut ChaCha20Rng) -> Result<u64> {
    let repetitions = repetitions.validate()?;
    let u: f64 = rng.random();
    let mut cumulative = 0.0;
    for (k, p) in (0..=MAX_CANDIDATES).zip(repetitions.probabilities()) {
        cumulative += p;
        if u < cumulative {
            return Ok(k);
        }
    }
    Err(EngineError::invalid(
        "search",
        format!("more than {MAX_CANDIDATES} candidates drawn (mean {} of at most {MAX_MEAN})", repetitions.mean()),
    ))
}

/// The score released for `trained`: its accuracy on public data, or its noisy count of correct
/// predictions over the public number of private held-out examples.
fn released_score<T>(trained: &Trained<T>, score: Score, rng: &mut ChaCha20Rng) -> Result<f64> {
    match score {
        Score::Public => Ok(trained.correct as f64 / trained.evaluated.max(1) as f64),
        Score::Private { noise_multiplier, held_out } => {
            if trained.evaluated != held_out || held_out == 0 {
                return Err(EngineError::invalid(
                    "score",
                    format!("{} held-out examples evaluated where the search declared {held_out}", trained.evaluated),
                ));
            }
            let noise: f64 = rng.sample(StandardNormal);
            Ok((trained.correct as f64 + noise_multiplier * noise) / held_out as f64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k_follows_its_distribution_and_is_drawn_from_a_secret_key() {
        let repetitions = Repetitions::TruncatedNegativeBinomial { shape: 1.0, mean: 4.0 };
        let mut rng = ChaChaState::new(Some(9), SEARCH_STREAM).restore();
        let draws: Vec<u64> = (0..20_000).map(|_| candidates(repetitions, &mut rng).unwrap()).collect();
        let mean = draws.iter().sum::<u64>() as f64 / draws.len() as f64;
        assert!((mean - 4.0).abs() < 0.15, "mean {mean}");
        for k in 1..6 {
            let seen = draws.iter().filter(|&&d| d == k).count() as f64 / draws.len() as f64;
            let p = repetitions.probability(k);
            assert!(
                (seen - p).abs() < 4.0 * (p * (1.0 - p) / draws.len() as f64).sqrt() + 1e-3,
                "P[K={k}] {seen} vs {p}"
            );
        }
        // Seeded: reproducible; unseeded: keyed by the OS, so two searches draw differently.
        let seq = |seed| {
            let mut rng = ChaChaState::new(seed, SEARCH_STREAM).restore();
            (0..64).map(|_| candidates(repetitions, &mut rng).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(seq(Some(3)), seq(Some(3)));
        assert_ne!(seq(None), seq(None), "unseeded draws come from the OS");
        assert!(candidates(Repetitions::Poisson { mean: 1e9 }, &mut rng).is_err(), "absurd mean");
    }

    #[test]
    fn the_best_candidate_comes_back_with_the_searchs_certified_epsilon() {
        let configs: Vec<u32> = (0..6).collect();
        let settings = SearchSettings {
            repetitions: Repetitions::TruncatedNegativeBinomial { shape: 1.0, mean: 8.0 },
            target_epsilon: 2.0,
            delta: 1e-5,
            score: Score::Private { noise_multiplier: 20.0, held_out: 1000 },
            seed: Some(11),
        };
        let shape = |_: &u32| TrainingShape { sample_rate: 0.01, steps: 300 };
        let mut seen = Vec::new();
        let out = search(&configs, shape, &settings, |&c, z| {
            seen.push((c, z));
            Ok(Trained { value: c, correct: 100 * c as usize, evaluated: 1000 })
        })
        .unwrap();
        assert!(out.privacy.epsilon <= 2.0 && out.privacy.guarantee == dp_accounting::Guarantee::Certified);
        let (config, value, score) = out.chosen.expect("K >= 1 for a truncated negative binomial");
        let best_seen = seen.iter().map(|(c, _)| *c).max().unwrap();
        assert_eq!((config, value), (best_seen, best_seen), "scores 0.1 apart, noise 0.02: the best wins");
        assert!((score - 0.1 * f64::from(best_seen)).abs() < 0.1, "within 5 sigma");
        assert_ne!(score, 0.1 * f64::from(best_seen), "the score released is noisy");
        assert!(seen.iter().all(|(_, z)| (z - seen[0].1).abs() < 1e-12), "one shape, one noise multiplier");
        // Hostile: an empty space; a budget the scores alone exceed; a score over another count.
        let never = |_: &u32, _: f64| -> Result<Trained<u32>> { unreachable!("no candidate trains") };
        assert!(search(&[] as &[u32], shape, &settings, never).is_err());
        let tight = SearchSettings { target_epsilon: 0.05, ..settings };
        let err = search(&configs, shape, &tight, never).unwrap_err().to_string();
        assert!(err.contains("too small"), "{err}");
        let wrong = search(&configs, shape, &settings, |&c, _| Ok(Trained { value: c, correct: 1, evaluated: 10 }));
        assert!(wrong.is_err());
    }
}
