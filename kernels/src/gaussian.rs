//! Standard normal draws from ChaCha20 words by the Box-Muller transform, in f32 operations the
//! device kernel repeats one for one. Each block of sixteen words gives eight normals: words
//! 4p..4p+3 make pair p, the radius from 48 random bits (so the tail reaches
//! sqrt(2 ln 2^49) = 8.24 sigma, where f32 uniforms from 24 bits stop at 5.8 sigma, as Burn's
//! and most GPU generators do) and the angle from 24 bits.

use crate::chacha::{BLOCKS_AT_ONCE, StreamPosition, blocks};
use rayon::prelude::*;

/// Normals drawn from one ChaCha20 block.
pub const NORMALS_PER_BLOCK: usize = 8;

/// 2^-24: one unit in the last place of a 24-bit uniform.
pub const TWO_POW_M24: f32 = 1.0 / 16_777_216.0;

/// ln(u) for u in (0, 1]. Near 1 a GPU's `ln` has an absolute error around 4e-8, which is a large
/// relative error in the small radius sqrt(-2 ln u); there ln(u) = log1p(u - 1) (u - 1 exact) by
/// the series 2 atanh(t), t = x / (2 + x), to t^13 (truncation below 1e-9 relative for u >= 3/4),
/// in operations every backend rounds alike.
pub fn ln_unit(u: f32) -> f32 {
    if u >= 0.75 {
        let x = u - 1.0;
        let t = x / (2.0 + x);
        let t2 = t * t;
        let series = 1.0
            + t2 * (1.0 / 3.0 + t2 * (1.0 / 5.0 + t2 * (1.0 / 7.0 + t2 * (1.0 / 9.0 + t2 * (1.0 / 11.0 + t2 / 13.0)))));
        2.0 * t * series
    } else {
        u.ln()
    }
}

/// The two normals of pair (w0, w1, w2): radius from w0, w1 (48 bits, in (0, 1]), angle from w2.
pub fn box_muller(w0: u32, w1: u32, w2: u32) -> (f32, f32) {
    let hi = (w0 >> 8) as f32;
    let lo = (w1 >> 8) as f32;
    let u1 = (hi + (lo + 0.5) * TWO_POW_M24) * TWO_POW_M24;
    let u2 = ((w2 >> 8) as f32 + 0.5) * TWO_POW_M24;
    let radius = (-2.0 * ln_unit(u1)).sqrt();
    let angle = std::f32::consts::TAU * u2;
    (radius * angle.cos(), radius * angle.sin())
}

/// The eight normals of one block.
pub fn block_normals(words: &[u32; 16]) -> [f32; NORMALS_PER_BLOCK] {
    let mut out = [0.0; NORMALS_PER_BLOCK];
    for p in 0..4 {
        let (c, s) = box_muller(words[4 * p], words[4 * p + 1], words[4 * p + 2]);
        out[2 * p] = c;
        out[2 * p + 1] = s;
    }
    out
}

/// Blocks a draw of `n` normals reads.
pub fn blocks_for(n: usize) -> u64 {
    n.div_ceil(NORMALS_PER_BLOCK) as u64
}

/// Normals per parallel task (512 blocks): enough work per task to hide the scheduling.
const TASK_NORMALS: usize = 512 * NORMALS_PER_BLOCK;

/// Writes normals `first..first + out.len()` of `position` into `out` (`first` a multiple of
/// [`NORMALS_PER_BLOCK`]), then applies `finish(i, z)` to each in place, `i` counted from `first`.
fn fill_normals(position: &StreamPosition, first: usize, out: &mut [f32], finish: &impl Fn(usize, f32) -> f32) {
    let first_block = position.block + (first / NORMALS_PER_BLOCK) as u64;
    let per_group = BLOCKS_AT_ONCE * NORMALS_PER_BLOCK;
    for (g, group) in out.chunks_mut(per_group).enumerate() {
        let words = blocks(&position.key, first_block + (g * BLOCKS_AT_ONCE) as u64, position.stream);
        for (j, (chunk, words)) in group.chunks_mut(NORMALS_PER_BLOCK).zip(&words).enumerate() {
            let z = block_normals(words);
            for (k, (o, z)) in chunk.iter_mut().zip(z).enumerate() {
                *o = finish(first + g * per_group + j * NORMALS_PER_BLOCK + k, z);
            }
        }
    }
}

/// finish(i, z_i) for the first `n` standard normals z from `position` (element i from block
/// i / 8, slot i % 8), in parallel: the same values whatever the threads, as every element's
/// block is fixed by its index.
pub fn map_normals(position: &StreamPosition, n: usize, finish: impl Fn(usize, f32) -> f32 + Sync) -> Vec<f32> {
    let mut out = vec![0.0f32; n];
    out.par_chunks_mut(TASK_NORMALS)
        .enumerate()
        .for_each(|(t, chunk)| fill_normals(position, t * TASK_NORMALS, chunk, &finish));
    out
}

/// The first `n` standard normals from `position`: element i comes from block i / 8, slot i % 8.
pub fn normals(position: &StreamPosition, n: usize) -> Vec<f32> {
    map_normals(position, n, |_, z| z)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chacha::block;

    #[test]
    fn parallel_normals_are_the_blocks_in_order_from_any_start() {
        for (start, n) in [(0u64, 1usize), (5, 8 * TASK_NORMALS / 8 + 3), (1 << 33, 3 * TASK_NORMALS + 13)] {
            let position = StreamPosition { key: [7; 8], stream: 3, block: start };
            let serial: Vec<f32> = (0..blocks_for(n))
                .flat_map(|b| block_normals(&block(&position.key, start + b, position.stream)))
                .take(n)
                .collect();
            let got = normals(&position, n);
            assert_eq!(got.len(), n);
            assert!(got.iter().zip(&serial).all(|(a, b)| a.to_bits() == b.to_bits()), "start {start}, {n} normals");
            let mapped = map_normals(&position, n, |i, z| i as f32 + 2.0 * z);
            assert!(mapped.iter().enumerate().all(|(i, &v)| v.to_bits() == (i as f32 + 2.0 * serial[i]).to_bits()));
        }
    }
}
