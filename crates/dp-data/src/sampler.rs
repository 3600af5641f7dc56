//! Lot samplers. Poisson sampling (each example in the lot independently with probability q) is
//! what the accountants assume; shuffled fixed-size lots are offered, and their accounting must say
//! it is not covered. Randomness comes from ChaCha20, keyed from the OS unless a seed is given:
//! which examples a step used is part of what DP hides.

use crate::error::{DataError, Result};
use crate::rng_state::ChaChaState;
use rand::{Rng, seq::SliceRandom};
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

/// A lot sampler over `n` examples; its whole state serialises for checkpoints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LotSampler {
    sampling: Sampling,
    n: usize,
    rng: ChaChaState,
    /// Shuffled sampling: the current pass's order and how far it has been used.
    order: Vec<usize>,
    cursor: usize,
}

impl LotSampler {
    /// A sampler over `n` examples, keyed from the OS, or from `seed` for a reproducible run.
    pub fn new(sampling: Sampling, n: usize, seed: Option<u64>) -> Result<Self> {
        Self::with_stream(sampling, n, ChaChaState::new(seed, 0))
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

    /// How lots are drawn.
    pub fn sampling(&self) -> Sampling {
        self.sampling
    }

    /// The number of examples N lots are drawn from.
    pub fn population(&self) -> usize {
        self.n
    }

    /// The next lot's example indices, in increasing order for Poisson lots.
    pub fn next_lot(&mut self) -> Vec<usize> {
        let mut rng = self.rng.restore();
        let lot = match self.sampling {
            Sampling::Poisson { rate } => (0..self.n).filter(|_| rng.random_bool(rate)).collect(),
            Sampling::Shuffled { lot_size } => {
                if self.order.is_empty() || self.cursor + lot_size > self.n {
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
    fn state_roundtrip_continues_the_same_stream() {
        let mut a = LotSampler::new(Sampling::Poisson { rate: 0.3 }, 50, None).unwrap();
        a.next_lot();
        let saved = serde_json::to_string(&a).unwrap();
        let mut b: LotSampler = serde_json::from_str(&saved).unwrap();
        for _ in 0..5 {
            assert_eq!(a.next_lot(), b.next_lot());
        }
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
