//! ChaCha20 streams as a run keeps them: the secret key apart from the position, so that a
//! checkpoint records where each stream is ([`ChaChaPosition`], public) without what would let
//! a reader regenerate it ([`SecretKey`], kept in the run's key file), and a resumed run neither
//! reuses nor skips random words.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

/// A 256-bit ChaCha20 key. Whoever holds it can regenerate every word of its streams, so it is
/// never printed (its `Debug` is redacted) and never written beside a run's public state.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey([u8; 32]);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(redacted)")
    }
}

impl SecretKey {
    /// 256 bits from the operating system's generator.
    pub fn from_os() -> Self {
        Self(ChaCha20Rng::from_os_rng().get_seed())
    }

    /// The key `rand_chacha` derives from a 64-bit seed (a `--seed` run: reproducible, and only
    /// as secret as the seed).
    pub fn from_seed(seed: u64) -> Self {
        Self(ChaCha20Rng::seed_from_u64(seed).get_seed())
    }

    /// The key of a run: from `seed` when given, else from the OS.
    pub fn for_run(seed: Option<u64>) -> Self {
        seed.map_or_else(Self::from_os, Self::from_seed)
    }

    /// A key from its bytes (as a key file stores them).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// A key from its 64 hex digits (as a key file stores them); None when it is not that.
    pub fn from_hex(text: &str) -> Option<Self> {
        let text = text.trim().as_bytes();
        if text.len() != 64 {
            return None;
        }
        let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(text.chunks_exact(2)) {
            *byte = digit(pair[0])? << 4 | digit(pair[1])?;
        }
        Some(Self(bytes))
    }

    /// The key's bytes (for the key file and MACs; never print them).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// Where a ChaCha20 stream is, without its key: the stream (nonce) and the next word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChaChaPosition {
    /// The stream (ChaCha20 nonce).
    pub stream: u64,
    /// The next 32-bit word to read.
    pub word_pos: u128,
}

/// A ChaCha20 generator's key, stream and word position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChaChaState {
    key: SecretKey,
    position: ChaChaPosition,
}

impl ChaChaState {
    /// A generator keyed from the OS, or from `seed` for a reproducible (labelled) run. Users of
    /// one seed (sampling, noise, initialisation) take different `stream`s so that no two of them
    /// ever read the same random words.
    pub fn new(seed: Option<u64>, stream: u64) -> Self {
        Self::keyed(SecretKey::for_run(seed), stream)
    }

    /// The start of `stream` under `key`.
    pub fn keyed(key: SecretKey, stream: u64) -> Self {
        Self::at(key, ChaChaPosition { stream, word_pos: 0 })
    }

    /// The generator of `key` at `position`.
    pub fn at(key: SecretKey, position: ChaChaPosition) -> Self {
        Self { key, position }
    }

    /// The position of `rng`.
    pub fn capture(rng: &ChaCha20Rng) -> Self {
        let position = ChaChaPosition { stream: rng.get_stream(), word_pos: rng.get_word_pos() };
        Self { key: SecretKey(rng.get_seed()), position }
    }

    /// Where this generator is (what a checkpoint records).
    pub fn position(&self) -> ChaChaPosition {
        self.position
    }

    /// Its key.
    pub fn key(&self) -> &SecretKey {
        &self.key
    }

    /// The key as eight little-endian words, for generators that compute ChaCha20 blocks directly
    /// (the device noise kernels).
    pub fn key_words(&self) -> [u32; 8] {
        std::array::from_fn(|i| u32::from_le_bytes(std::array::from_fn(|b| self.key.0[4 * i + b])))
    }

    /// The stream (ChaCha20 nonce) of this generator.
    pub fn stream(&self) -> u64 {
        self.position.stream
    }

    /// The first 64-byte block not yet read; a partly read block is skipped, never reused.
    pub fn next_block(&self) -> u64 {
        self.position.word_pos.div_ceil(16) as u64
    }

    /// This generator moved on to block `block` (which must not be behind [`Self::next_block`]).
    pub fn at_block(&self, block: u64) -> Self {
        debug_assert!(block >= self.next_block(), "a stream never moves back");
        self.at_word(u128::from(block) * 16)
    }

    /// This generator at word `word_pos` of its stream.
    pub fn at_word(&self, word_pos: u128) -> Self {
        Self { key: self.key.clone(), position: ChaChaPosition { word_pos, ..self.position } }
    }

    /// A generator at this position.
    pub fn restore(&self) -> ChaCha20Rng {
        let mut rng = ChaCha20Rng::from_seed(self.key.0);
        rng.set_stream(self.position.stream);
        rng.set_word_pos(self.position.word_pos);
        rng
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    #[test]
    fn a_position_with_its_key_continues_the_stream() {
        let mut rng = ChaChaState::new(Some(4), 3).restore();
        rng.next_u64();
        let saved = ChaChaState::capture(&rng);
        let json = serde_json::to_string(&saved.position()).unwrap();
        let back = ChaChaState::at(saved.key().clone(), serde_json::from_str(&json).unwrap());
        assert_eq!(back.restore().next_u64(), rng.next_u64());
        assert!(!json.contains("seed") && !json.contains("key"), "{json}");
        assert_eq!(format!("{:?}", saved.key()), "SecretKey(redacted)");
    }

    #[test]
    fn keys_read_from_hex_are_their_bytes_or_nothing() {
        let text: String = (0u8..32).map(|b| format!("{:02x}", b * 7)).collect();
        let bytes: Vec<u8> = (0u8..32).map(|b| b * 7).collect();
        assert_eq!(SecretKey::from_hex(&text).unwrap().as_bytes().as_slice(), bytes.as_slice());
        assert_eq!(
            SecretKey::from_hex(&format!(" {}\n", text.to_uppercase())).unwrap().as_bytes().as_slice(),
            bytes.as_slice()
        );
        for bad in [&text[..62], "zz", &format!("{}0", text), &text.replacen('0', "g", 1)] {
            assert!(SecretKey::from_hex(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn seeded_keys_are_rand_chachas_and_os_keys_differ() {
        assert_eq!(SecretKey::from_seed(5).as_bytes(), &ChaCha20Rng::seed_from_u64(5).get_seed());
        assert_ne!(SecretKey::from_os(), SecretKey::from_os());
    }
}
