//! Randomness for ERM runs: ChaCha20 keyed from the OS (a cryptographic generator for every
//! noise draw), or from `--seed` for a reproducible, labelled run.

use dp_data::ChaChaState;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::StandardNormal;

/// A run's generator.
pub struct NoiseRng(ChaCha20Rng);

impl NoiseRng {
    /// Keyed from `seed` when given, otherwise from the operating system; `stream` separates the
    /// generators of one seed (repeats, methods) so that no two read the same words.
    pub fn new(seed: Option<u64>, stream: u64) -> Self {
        Self(ChaChaState::new(seed, stream).restore())
    }

    /// A new generator's state on `stream`, keyed by 256 bits of this one's output: how a run
    /// hands its engine pieces (lot sampler, noise stream) their own full-strength keys.
    pub fn fork(&mut self, stream: u64) -> ChaChaState {
        let mut key = [0u8; 32];
        self.0.fill_bytes(&mut key);
        let mut forked = ChaCha20Rng::from_seed(key);
        forked.set_stream(stream);
        ChaChaState::capture(&forked)
    }

    /// One standard normal draw.
    pub fn normal(&mut self) -> f64 {
        self.0.sample(StandardNormal)
    }

    /// `len` draws of N(0, sigma^2).
    pub fn gaussian(&mut self, len: usize, sigma: f64) -> Vec<f64> {
        (0..len).map(|_| sigma * self.normal()).collect()
    }

    /// A uniform index below `n`.
    pub fn index(&mut self, n: usize) -> usize {
        self.0.random_range(0..n)
    }

    /// True with probability `p`.
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.0.random_bool(p)
    }

    /// `k` distinct indices below `n`, in random order.
    pub fn sample_without_replacement(&mut self, n: usize, k: usize) -> Vec<usize> {
        rand::seq::index::sample(&mut self.0, n, k).into_vec()
    }
}
