//! A search's plan, drawn before any candidate trains: K from its distribution, then for each
//! candidate its configuration, its name, a number for what it draws without the data, and the
//! standard normal noise of its released score. Kept in the search's sealed state, so that a
//! resumed search neither redraws K nor releases a score with fresh noise.

use dp_accounting::repeat_and_select::{MAX_MEAN, Repetitions};
use dp_data::SecretKey;
use dp_engine::error::{EngineError, Result};
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

/// The most candidates a search runs: refused beyond (a heavy tail drawn from an absurd mean).
const MAX_CANDIDATES: u64 = 100_000;

/// One candidate as the plan draws it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Planned {
    /// The index of its configuration.
    pub(crate) config: usize,
    /// Its name (from the OS, not its rank: files named after it must not count the others).
    pub(crate) name: String,
    /// A number drawn for it by the search's CSPRNG (the seed of what it draws without data).
    pub(crate) draw: u64,
    /// The standard normal noise of its score.
    pub(crate) score_noise: f64,
}

/// The plan of a search over `configs` configurations: K drawn as `repetitions` says, then each
/// candidate's draws, all from `rng`.
pub(crate) fn draw_plan(repetitions: Repetitions, configs: usize, rng: &mut ChaCha20Rng) -> Result<Vec<Planned>> {
    let k = candidates(repetitions, rng)?;
    Ok((0..k)
        .map(|_| Planned {
            config: rng.random_range(0..configs),
            name: format!("candidate-{}", hex::encode(&SecretKey::from_os().as_bytes()[..8])),
            draw: rng.random(),
            score_noise: rng.sample(StandardNormal),
        })
        .collect())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::SEARCH_STREAM;
    use dp_data::ChaChaState;

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
    fn a_seeded_plan_is_reproducible_but_its_names_come_from_the_os() {
        let repetitions = Repetitions::TruncatedNegativeBinomial { shape: 1.0, mean: 6.0 };
        let plan = |seed| draw_plan(repetitions, 4, &mut ChaChaState::new(seed, SEARCH_STREAM).restore()).unwrap();
        let (a, b) = (plan(Some(5)), plan(Some(5)));
        let drawn = |p: &[Planned]| p.iter().map(|c| (c.config, c.draw, c.score_noise)).collect::<Vec<_>>();
        assert!(!a.is_empty() && drawn(&a) == drawn(&b));
        assert!(a.iter().zip(&b).all(|(x, y)| x.name != y.name), "names do not follow the seed");
        assert!(a.iter().all(|c| c.config < 4));
    }
}
