//! Lot samplers. Poisson sampling (each example in the lot independently with probability q) is
//! what the accountants assume; shuffled fixed-size lots are offered, and their accounting must say
//! it is not covered. Randomness comes from ChaCha20, keyed from the OS unless a seed is given:
//! which examples a step used is part of what DP hides.

use crate::error::{DataError, Result};
use crate::rng_state::{ChaChaPosition, ChaChaState};
use rand::{RngCore, seq::SliceRandom};
use serde::{Deserialize, Serialize};

/// How lots are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Sampling {
    /// Each example joins each lot independently with probability `rate`.
    Poisson {
        /// The sampling rate q in (0, 1].
        rate: f64,
    },
    /// Lots of exactly `lot_size` examples from a shuffled pass over the data (an epoch's
    /// remainder smaller than a lot is dropped).
    Shuffled {
        /// Examples per lot.
        lot_size: usize,
    },
}

/// A lot sampler over `n` examples. Its state follows from its key, its sampling and the
/// number of lots drawn (see [`LotSampler::replayed`]); what a checkpoint keeps of it is the
/// key-free [`SamplerPosition`], checked against a replay on resume.
#[derive(Debug, Clone)]
pub struct LotSampler {
    sampling: Sampling,
    n: usize,
    rng: ChaChaState,
    /// Shuffled sampling: the current pass's order (secret: it says which examples the next lots
    /// hold) and how far it has been used.
    order: Vec<usize>,
    cursor: usize,
}

/// Where a sampler is, without its key or its shuffled order: what a checkpoint may show.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplerPosition {
    /// How lots are drawn.
    pub sampling: Sampling,
    /// Examples lots are drawn from.
    pub n: usize,
    /// The random stream's position.
    pub stream: ChaChaPosition,
    /// Shuffled sampling: examples of the current pass already used.
    pub cursor: usize,
}

/// The ChaCha20 stream of a run's lot sampler (its noise and initialisation take others).
pub const SAMPLER_STREAM: u64 = 0;

/// Random 32-bit words a Poisson lot reads: one u64 per example.
const WORDS_PER_EXAMPLE: u128 = 2;

/// The threshold below which a uniform u64 includes an example at rate `rate`: rand's
/// `Bernoulli` (p 2^64, truncated), so lots are those `random_bool` drew.
fn inclusion_threshold(rate: f64) -> u64 {
    (rate * 2.0 * (1u64 << 63) as f64) as u64
}

impl LotSampler {
    /// A sampler over `n` examples, keyed from the OS, or from `seed` for a reproducible run.
    pub fn new(sampling: Sampling, n: usize, seed: Option<u64>) -> Result<Self> {
        Self::with_stream(sampling, n, ChaChaState::new(seed, SAMPLER_STREAM))
    }

    /// A sampler over `n` examples drawing from the random stream `rng`.
    pub fn with_stream(sampling: Sampling, n: usize, rng: ChaChaState) -> Result<Self> {
        if n == 0 {
            return Err(DataError::InvalidParameter { name: "dataset size", reason: "no examples".into() });
        }
        match sampling {
            Sampling::Poisson { rate } if !(rate.is_finite() && rate > 0.0 && rate <= 1.0) => {
                return Err(DataError::InvalidParameter {
                    name: "sampling rate",
                    reason: format!("{rate} is not in (0, 1]"),
                });
            }
            Sampling::Shuffled { lot_size } if lot_size == 0 || lot_size > n => {
                return Err(DataError::InvalidParameter {
                    name: "lot size",
                    reason: format!("{lot_size} is not between 1 and the dataset size {n}"),
                });
            }
            _ => {}
        }
        Ok(Self { sampling, n, rng, order: Vec::new(), cursor: 0 })
    }

    /// The sampler that starts from `rng` after it has drawn `lots` lots: Poisson lots read a
    /// fixed number of words, so their position is computed; shuffled passes are replayed.
    pub fn replayed(sampling: Sampling, n: usize, rng: ChaChaState, lots: u64) -> Result<Self> {
        let mut sampler = Self::with_stream(sampling, n, rng)?;
        match sampling {
            Sampling::Poisson { .. } => {
                let words = (n as u128)
                    .checked_mul(WORDS_PER_EXAMPLE * u128::from(lots))
                    .and_then(|w| w.checked_add(sampler.rng.position().word_pos))
                    .filter(|&w| w < 1 << 68)
                    .ok_or_else(|| DataError::InvalidParameter {
                        name: "lots",
                        reason: format!("{lots} lots of {n} examples are beyond the stream's length"),
                    })?;
                sampler.rng = sampler.rng.at_word(words);
            }
            Sampling::Shuffled { .. } => {
                for _ in 0..lots {
                    sampler.next_lot();
                }
            }
        }
        Ok(sampler)
    }

    /// How lots are drawn.
    pub fn sampling(&self) -> Sampling {
        self.sampling
    }

    /// The number of examples N lots are drawn from.
    pub fn population(&self) -> usize {
        self.n
    }

    /// Where the sampler is (key and order left out).
    pub fn position(&self) -> SamplerPosition {
        SamplerPosition { sampling: self.sampling, n: self.n, stream: self.rng.position(), cursor: self.cursor }
    }

    /// The next lot's example indices, in increasing order for Poisson lots.
    pub fn next_lot(&mut self) -> Vec<usize> {
        let mut rng = self.rng.restore();
        let lot = match self.sampling {
            Sampling::Poisson { rate } => {
                let threshold = inclusion_threshold(rate);
                (0..self.n).filter(|_| rng.next_u64() < threshold || rate >= 1.0).collect()
            }
            Sampling::Shuffled { lot_size } => {
                if self.order.len() != self.n || self.cursor + lot_size > self.n {
                    self.order = (0..self.n).collect();
                    self.order.shuffle(&mut rng);
                    self.cursor = 0;
                }
                self.cursor += lot_size;
                self.order[self.cursor - lot_size..self.cursor].to_vec()
            }
        };
        self.rng = ChaChaState::capture(&rng);
        lot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_lot_sizes_are_binomial() {
        let (n, q, lots) = (10_000, 0.01, 400);
        let mut s = LotSampler::new(Sampling::Poisson { rate: q }, n, Some(7)).unwrap();
        let sizes: Vec<f64> = (0..lots).map(|_| s.next_lot().len() as f64).collect();
        let mean = sizes.iter().sum::<f64>() / lots as f64;
        let var = sizes.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (lots - 1) as f64;
        // Binomial(n, q): mean 100, variance 99; the mean of 400 lots has sd 0.5.
        assert!((mean - 100.0).abs() < 2.5, "{mean}");
        assert!((var / 99.0 - 1.0).abs() < 0.3, "{var}");
    }

    #[test]
    fn every_example_is_equally_likely() {
        let mut s = LotSampler::new(Sampling::Poisson { rate: 0.5 }, 4, Some(1)).unwrap();
        let mut counts = [0usize; 4];
        for _ in 0..4000 {
            for i in s.next_lot() {
                counts[i] += 1;
            }
        }
        // Each count ~ Binomial(4000, 0.5): sd 31.6.
        assert!(counts.iter().all(|&c| (c as f64 - 2000.0).abs() < 160.0), "{counts:?}");
    }

    #[test]
    fn shuffled_lots_cover_each_pass_once() {
        let mut s = LotSampler::new(Sampling::Shuffled { lot_size: 3 }, 10, Some(3)).unwrap();
        let mut seen: Vec<usize> = (0..3).flat_map(|_| s.next_lot()).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 9);
    }

    #[test]
    fn poisson_lots_are_those_of_rands_bernoulli() {
        use rand::Rng;
        let rng = ChaChaState::new(Some(11), 0);
        let mut s = LotSampler::with_stream(Sampling::Poisson { rate: 0.3 }, 200, rng.clone()).unwrap();
        let mut reference = rng.restore();
        for _ in 0..5 {
            let want: Vec<usize> = (0..200).filter(|_| reference.random_bool(0.3)).collect();
            assert_eq!(s.next_lot(), want);
        }
    }

    #[test]
    fn a_replayed_sampler_is_where_drawing_leaves_it() {
        for sampling in
            [Sampling::Poisson { rate: 0.3 }, Sampling::Poisson { rate: 1.0 }, Sampling::Shuffled { lot_size: 7 }]
        {
            let rng = ChaChaState::new(None, 0);
            let mut drawn = LotSampler::with_stream(sampling, 50, rng.clone()).unwrap();
            for _ in 0..9 {
                drawn.next_lot();
            }
            let mut replayed = LotSampler::replayed(sampling, 50, rng.clone(), 9).unwrap();
            assert_eq!(replayed.position(), drawn.position(), "{sampling:?}");
            assert_ne!(LotSampler::replayed(sampling, 50, rng, 8).unwrap().position(), drawn.position());
            for _ in 0..5 {
                assert_eq!(replayed.next_lot(), drawn.next_lot(), "{sampling:?}");
            }
        }
        let huge =
            LotSampler::replayed(Sampling::Poisson { rate: 0.5 }, usize::MAX, ChaChaState::new(None, 0), u64::MAX);
        assert!(huge.is_err());
    }

    #[test]
    fn a_position_shows_neither_key_nor_order() {
        let mut s = LotSampler::new(Sampling::Shuffled { lot_size: 3 }, 10, Some(2)).unwrap();
        s.next_lot();
        let json = serde_json::to_string(&s.position()).unwrap();
        assert!(!json.contains("order") && !json.contains("seed") && !json.contains("key"), "{json}");
    }

    #[test]
    fn seeds_reproduce_and_os_keys_differ() {
        let lot = |seed| LotSampler::new(Sampling::Poisson { rate: 0.5 }, 64, seed).unwrap().next_lot();
        assert_eq!(lot(Some(5)), lot(Some(5)));
        assert_ne!(lot(None), lot(None)); // 2^-64 chance of a false failure
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(LotSampler::new(Sampling::Poisson { rate: 0.0 }, 10, None).is_err());
        assert!(LotSampler::new(Sampling::Poisson { rate: f64::NAN }, 10, None).is_err());
        assert!(LotSampler::new(Sampling::Shuffled { lot_size: 11 }, 10, None).is_err());
        assert!(LotSampler::new(Sampling::Poisson { rate: 0.5 }, 0, None).is_err());
    }
}
