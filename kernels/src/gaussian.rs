//! Standard normal draws from ChaCha20 words by the Box-Muller transform, in f32 operations the
//! device kernel repeats one for one (no library ln, sin or cos, whose roundings differ between
//! libm, a GPU and a compiler: a polynomial of our own on each side, branch-free, so that the
//! host's loop vectorises). Each block of sixteen words gives eight normals: words 4p..4p+3 make
//! pair p, the radius from 48 random bits (so the tail reaches sqrt(2 ln 2^49) = 8.24 sigma,
//! where f32 uniforms from 24 bits stop at 5.8 sigma, as Burn's and most GPU generators do) and
//! the angle from 24 bits.

use crate::chacha::{BLOCKS_AT_ONCE, StreamPosition, blocks};
use crate::vectorised::vectorised;
use rayon::prelude::*;

/// Normals drawn from one ChaCha20 block.
pub const NORMALS_PER_BLOCK: usize = 8;

/// 2^-24: one unit in the last place of a 24-bit uniform.
pub const TWO_POW_M24: f32 = 1.0 / 16_777_216.0;

/// ln 2 in two parts, the first with 15 significant bits, so that e ln 2 for |e| < 128 is its
/// first part times e (exact) plus a small correction (Cody and Waite's split).
pub const LN_2: [f32; 2] = [0.693_145_75, 1.428_606_8e-6];

/// ln(u) for a normal u in (0, 1]: u = 2^e m with m in [sqrt(1/2), sqrt(2)) (from u's bits),
/// ln u = e ln 2 + log1p(m - 1), m - 1 exact, log1p(x) by the series 2 atanh(t), t = x / (2 +
/// x), |t| <= 0.172, to t^13 (truncation below 3e-13 relative); in (sqrt(1/2), 1] e is 0 and the
/// value is the series alone, so that near 1, where the radius sqrt(-2 ln u) is small, its
/// relative error stays that of a few roundings.
#[inline(always)]
pub fn ln_unit(u: f32) -> f32 {
    let bits = u.to_bits();
    let mantissa = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    let above = mantissa > std::f32::consts::SQRT_2;
    let m = if above { 0.5 * mantissa } else { mantissa };
    let e = ((bits >> 23) as i32 - 127 + i32::from(above)) as f32;
    let x = m - 1.0;
    let t = x / (2.0 + x);
    let t2 = t * t;
    let series =
        1.0 + t2 * (1.0 / 3.0 + t2 * (1.0 / 5.0 + t2 * (1.0 / 7.0 + t2 * (1.0 / 9.0 + t2 * (1.0 / 11.0 + t2 / 13.0)))));
    e * LN_2[0] + (e * LN_2[1] + 2.0 * t * series)
}

/// (cos 2 pi u, sin 2 pi u) for u = (k + 1/2) 2^-24, k the 24 bits `k`: the nearest quarter
/// turn q in integers, the rest r = u - q / 4 in [-1/8, 1/8] exact, x = 2 pi r, cos and sin of
/// x by Cephes' polynomials for |x| <= pi / 4 (about 1e-7 relative), then turned by q quarters
/// (swapped and signs flipped in the bits).
#[inline(always)]
pub fn turn(k: u32) -> (f32, f32) {
    let q = (k + (1 << 21)) >> 22;
    let r = ((k as i32 - (q << 22) as i32) as f32 + 0.5) * TWO_POW_M24;
    let x = std::f32::consts::TAU * r;
    let z = x * x;
    let sin = x + x * z * (-1.666_665_5e-1 + z * (8.332_161e-3 + z * -1.951_529_6e-4));
    let cos = z * z * (4.166_664_6e-2 + z * (-1.388_731_6e-3 + z * 2.443_315_7e-5)) - 0.5 * z + 1.0;
    let (c, s) = if q & 1 == 1 { (sin, cos) } else { (cos, sin) };
    let negate = |v: f32, flip: u32| f32::from_bits(v.to_bits() ^ (flip << 30));
    (negate(c, (q + 1) & 2), negate(s, q & 2))
}

/// The two normals of pair (w0, w1, w2): radius from w0, w1 (48 bits, in (0, 1]), angle from w2.
#[inline(always)]
pub fn box_muller(w0: u32, w1: u32, w2: u32) -> (f32, f32) {
    let hi = (w0 >> 8) as f32;
    let lo = (w1 >> 8) as f32;
    let u1 = (hi + (lo + 0.5) * TWO_POW_M24) * TWO_POW_M24;
    let radius = (-2.0 * ln_unit(u1)).sqrt();
    let (cos, sin) = turn(w2 >> 8);
    (radius * cos, radius * sin)
}

/// The normals of [`BLOCKS_AT_ONCE`] blocks, in order: the pairs' words gathered into rows, so
/// that the transform runs as one vectorised loop across them.
fn group_normals(words: &[[u32; 16]; BLOCKS_AT_ONCE]) -> [f32; BLOCKS_AT_ONCE * NORMALS_PER_BLOCK] {
    const PAIRS: usize = BLOCKS_AT_ONCE * NORMALS_PER_BLOCK / 2;
    let mut rows = [[0u32; PAIRS]; 3];
    for (p, (block, pair)) in (0..BLOCKS_AT_ONCE).flat_map(|b| (0..4).map(move |p| (b, p))).enumerate() {
        for (w, row) in rows.iter_mut().enumerate() {
            row[p] = words[block][4 * pair + w];
        }
    }
    let mut out = [0.0f32; BLOCKS_AT_ONCE * NORMALS_PER_BLOCK];
    vectorised(
        #[inline(always)]
        || {
            for (((pair, &w0), &w1), &w2) in
                out.as_chunks_mut::<2>().0.iter_mut().zip(&rows[0]).zip(&rows[1]).zip(&rows[2])
            {
                let (c, s) = box_muller(w0, w1, w2);
                *pair = [c, s];
            }
        },
    );
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
        for (k, (o, z)) in group.iter_mut().zip(group_normals(&words)).enumerate() {
            *o = finish(first + g * per_group + k, z);
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

    /// The eight normals of one block, one pair at a time: the reference for the grouped loop.
    fn block_normals(words: &[u32; 16]) -> [f32; NORMALS_PER_BLOCK] {
        let mut out = [0.0; NORMALS_PER_BLOCK];
        for p in 0..4 {
            (out[2 * p], out[2 * p + 1]) = box_muller(words[4 * p], words[4 * p + 1], words[4 * p + 2]);
        }
        out
    }

    /// The pair by Box-Muller in f64 from the same f32 uniform u1 (whose rounding is the
    /// generator's definition, not this transform's error) and the exact angle.
    fn reference(w0: u32, w1: u32, w2: u32) -> (f64, f64) {
        let u1 = (((w0 >> 8) as f32) + ((w1 >> 8) as f32 + 0.5) * TWO_POW_M24) * TWO_POW_M24;
        let radius = (-2.0 * f64::from(u1).ln()).sqrt();
        let angle = std::f64::consts::TAU * (f64::from(w2 >> 8) + 0.5) / 16_777_216.0;
        (radius * angle.cos(), radius * angle.sin())
    }

    /// Each normal against [`reference`]: the words at the ends of the radius's range and next to
    /// every quarter turn, and 3 million pairs from a stream. Over 10 million pairs the worst
    /// error measured is 2.4e-7 of max(1, |z|); libm's ln, cos and sin of the rounded angle 2 pi
    /// u, which this replaced, erred by 2.6e-6 (the angle's rounding, near cos's zeros).
    #[test]
    fn box_muller_matches_the_transform_in_f64() {
        let edges = [0u32, 0xff, 0x100, 0x1ff_ff00, 0x200_0000, 0x3ff_ff00, 0x400_0000, 0xffff_ffff, 0xbfff_ff00];
        let stream = crate::chacha::words(&StreamPosition { key: [3; 8], stream: 1, block: 9 }, 9 << 20);
        let triples = edges
            .into_iter()
            .flat_map(|a| edges.into_iter().flat_map(move |b| edges.into_iter().map(move |c| (a, b, c))))
            .chain(stream.chunks_exact(3).map(|w| (w[0], w[1], w[2])));
        let mut worst = 0.0f64;
        for (w0, w1, w2) in triples {
            let (c, s) = box_muller(w0, w1, w2);
            let (wc, ws) = reference(w0, w1, w2);
            for (got, want) in [(c, wc), (s, ws)] {
                worst = worst.max((f64::from(got) - want).abs() / want.abs().max(1.0));
            }
        }
        assert!(worst < 4e-7, "worst error {worst:e} of max(1, |z|)");
    }

    /// ln against f64's where the radius is small (u near 1, relative error) and across the range
    /// down to the least uniform, 2^-49.
    #[test]
    fn ln_unit_matches_ln_in_f64() {
        let near_one = (0..1 << 16).map(|i| 1.0 - i as f32 * 2f32.powi(-24));
        let across = (0..1 << 16).map(|i| 2f32.powf(-49.0 * i as f32 / 65_536.0));
        let half_root = std::f32::consts::FRAC_1_SQRT_2.to_bits();
        let edges = [half_root - 1, half_root, half_root + 1].map(f32::from_bits);
        for u in near_one.chain(across).chain(edges).chain([0.75, 2f32.powi(-49), 0.5, 1.0]) {
            let (got, want) = (f64::from(ln_unit(u)), f64::from(u).ln());
            assert!((got - want).abs() <= 2.5e-7 * want.abs(), "ln {u}: {got} against {want}");
        }
    }

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
