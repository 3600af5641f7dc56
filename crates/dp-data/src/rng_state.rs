//! The serialisable position of a ChaCha20 stream, so that checkpoints resume a run's sampling and
//! noise exactly where they stopped (a resumed run must not reuse or skip random words).

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

/// ChaCha20's key (seed), stream and word position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChaChaState {
    seed: [u8; 32],
    stream: u64,
    word_pos: u128,
}

impl ChaChaState {
    /// A generator keyed from the OS, or from `seed` for a reproducible (labelled) run. Users of
    /// one seed (sampling, noise, initialisation) take different `stream`s so that no two of them
    /// ever read the same random words.
    pub fn new(seed: Option<u64>, stream: u64) -> Self {
        let mut rng = match seed {
            Some(s) => ChaCha20Rng::seed_from_u64(s),
            None => ChaCha20Rng::from_os_rng(),
        };
        rng.set_stream(stream);
        Self::capture(&rng)
    }

    /// The position of `rng`.
    pub fn capture(rng: &ChaCha20Rng) -> Self {
        Self { seed: rng.get_seed(), stream: rng.get_stream(), word_pos: rng.get_word_pos() }
    }

    /// The key as eight little-endian words, for generators that compute ChaCha20 blocks directly
    /// (the device noise kernels).
    pub fn key_words(&self) -> [u32; 8] {
        std::array::from_fn(|i| u32::from_le_bytes(self.seed[4 * i..4 * i + 4].try_into().expect("4 bytes")))
    }

    /// The stream (ChaCha20 nonce) of this generator.
    pub fn stream(&self) -> u64 {
        self.stream
    }

    /// The first 64-byte block not yet read; a partly read block is skipped, never reused.
    pub fn next_block(&self) -> u64 {
        self.word_pos.div_ceil(16) as u64
    }

    /// This generator moved on to block `block` (which must not be behind [`Self::next_block`]).
    pub fn at_block(&self, block: u64) -> Self {
        debug_assert!(block >= self.next_block(), "a stream never moves back");
        Self { word_pos: u128::from(block) * 16, ..self.clone() }
    }

    /// A generator at this position.
    pub fn restore(&self) -> ChaCha20Rng {
        let mut rng = ChaCha20Rng::from_seed(self.seed);
        rng.set_stream(self.stream);
        rng.set_word_pos(self.word_pos);
        rng
    }
}
