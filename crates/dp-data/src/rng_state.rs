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

    /// A generator at this position.
    pub fn restore(&self) -> ChaCha20Rng {
        let mut rng = ChaCha20Rng::from_seed(self.seed);
        rng.set_stream(self.stream);
        rng.set_word_pos(self.word_pos);
        rng
    }
}
