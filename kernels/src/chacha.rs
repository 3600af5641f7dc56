//! The ChaCha20 block function (Bernstein 2008; the 64-bit counter, 64-bit nonce layout of
//! `rand_chacha`), the CPU reference of the device noise kernel: block `b` of stream `s` under key
//! `k` is the same sixteen words on every backend.

use crate::vectorised::vectorised;

/// "expand 32-byte k".
pub const CONSTANTS: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

/// Where a draw reads its random words: key, stream (nonce) and first block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamPosition {
    /// The 256-bit key as little-endian words.
    pub key: [u32; 8],
    /// The 64-bit stream (nonce).
    pub stream: u64,
    /// The 64-bit block counter of the first block read.
    pub block: u64,
}

/// Blocks [`blocks`] computes together: one AVX-512 register of u32 per state word.
pub const BLOCKS_AT_ONCE: usize = 16;

/// One quarter round on words a, b, c, d of `L` blocks at once (word-sliced: each state word is
/// the `L` blocks' values of that word).
#[inline(always)]
fn quarter_round<const L: usize>(x: &mut [[u32; L]; 16], a: usize, b: usize, c: usize, d: usize) {
    let (mut va, mut vb, mut vc, mut vd) = (x[a], x[b], x[c], x[d]);
    for (((a, b), c), d) in va.iter_mut().zip(&mut vb).zip(&mut vc).zip(&mut vd) {
        *a = a.wrapping_add(*b);
        *d = (*d ^ *a).rotate_left(16);
        *c = c.wrapping_add(*d);
        *b = (*b ^ *c).rotate_left(12);
        *a = a.wrapping_add(*b);
        *d = (*d ^ *a).rotate_left(8);
        *c = c.wrapping_add(*d);
        *b = (*b ^ *c).rotate_left(7);
    }
    (x[a], x[b], x[c], x[d]) = (va, vb, vc, vd);
}

/// Blocks `counter`, `counter + 1`, ... (`L` of them) of `stream` under `key` (20 rounds),
/// computed word-sliced.
#[inline(always)]
fn sliced<const L: usize>(key: &[u32; 8], counter: u64, stream: u64) -> [[u32; 16]; L] {
    let mut state = [[0u32; L]; 16];
    for (word, &c) in state.iter_mut().zip(&CONSTANTS) {
        *word = [c; L];
    }
    for (word, &k) in state[4..12].iter_mut().zip(key) {
        *word = [k; L];
    }
    let counters: [u64; L] = std::array::from_fn(|l| counter.wrapping_add(l as u64));
    state[12] = counters.map(|c| c as u32);
    state[13] = counters.map(|c| (c >> 32) as u32);
    state[14] = [stream as u32; L];
    state[15] = [(stream >> 32) as u32; L];
    let mut x = state;
    for _ in 0..10 {
        quarter_round(&mut x, 0, 4, 8, 12);
        quarter_round(&mut x, 1, 5, 9, 13);
        quarter_round(&mut x, 2, 6, 10, 14);
        quarter_round(&mut x, 3, 7, 11, 15);
        quarter_round(&mut x, 0, 5, 10, 15);
        quarter_round(&mut x, 1, 6, 11, 12);
        quarter_round(&mut x, 2, 7, 8, 13);
        quarter_round(&mut x, 3, 4, 9, 14);
    }
    let mut out = [[0u32; 16]; L];
    for (w, (word, init)) in x.iter().zip(&state).enumerate() {
        for (block, (&v, &i)) in out.iter_mut().zip(word.iter().zip(init)) {
            block[w] = v.wrapping_add(i);
        }
    }
    out
}

/// The sixteen output words of block `counter` of `stream` under `key` (20 rounds).
pub fn block(key: &[u32; 8], counter: u64, stream: u64) -> [u32; 16] {
    let [words] = sliced::<1>(key, counter, stream);
    words
}

/// Blocks `counter`, `counter + 1`, ... (16 of them) of `stream` under `key`: the words [`block`]
/// gives each, computed word-sliced inside `vectorised`, so that every operation of the rounds
/// is one vector instruction for the sixteen blocks.
pub fn blocks(key: &[u32; 8], counter: u64, stream: u64) -> [[u32; 16]; BLOCKS_AT_ONCE] {
    vectorised(|| sliced::<BLOCKS_AT_ONCE>(key, counter, stream))
}

/// The first `n` words read from `position` (whole blocks, in order).
pub fn words(position: &StreamPosition, n: usize) -> Vec<u32> {
    (0..n.div_ceil(16) as u64).flat_map(|b| block(&position.key, position.block + b, position.stream)).take(n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dp_data::ChaChaState;
    use rand::RngCore;

    #[test]
    fn rfc_8439_block_test_vector() {
        // RFC 8439 section 2.3.2: counter 1, nonce 00:00:00:09 00:00:00:4a 00:00:00:00. In the
        // 64/64 layout the nonce's first word is the counter's high half.
        let key: [u32; 8] = std::array::from_fn(|i| u32::from_le_bytes(std::array::from_fn(|j| (4 * i + j) as u8)));
        let counter = 1 | (0x0900_0000u64 << 32);
        let out = block(&key, counter, 0x4a00_0000);
        let expected = [
            0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033, 0x9aaa2204, 0x4e6cd4c3, 0x466482d2,
            0x09aa9f07, 0x05d7c214, 0xa2028bd9, 0xd19c12b5, 0xb94e16de, 0xe883d0cb, 0x4e3c50a2,
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn blocks_equal_rand_chacha_stream() {
        // rand_chacha is an independent implementation: the same key, stream and position must
        // give the same words, including across a block boundary and after a partial block.
        let state = ChaChaState::new(Some(77), 1).at_block(5);
        let mut rng = state.restore();
        let expected: Vec<u32> = (0..40).map(|_| rng.next_u32()).collect();
        let position = StreamPosition { key: state.key_words(), stream: state.stream(), block: state.next_block() };
        assert_eq!(words(&position, 40), expected);
        let partly_read = ChaChaState::capture(&rng);
        assert_eq!(partly_read.next_block(), 5 + 3, "40 words read: block 7 is partly used and skipped");
    }

    #[test]
    fn sixteen_blocks_at_once_are_the_blocks_one_by_one() {
        let key: [u32; 8] = std::array::from_fn(|i| 0x9e37_79b9u32.wrapping_mul(i as u32 + 1));
        // Including a counter whose low word wraps inside the group (the carry into word 13).
        for (counter, stream) in [(0u64, 0u64), (5, 77), ((1u64 << 32) - 3, 1 << 40), (u64::MAX - 20, 3)] {
            let together = blocks(&key, counter, stream);
            for (l, got) in together.iter().enumerate() {
                assert_eq!(*got, block(&key, counter + l as u64, stream), "block {counter} + {l} of stream {stream}");
            }
        }
    }
}
