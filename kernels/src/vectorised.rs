//! Host loops compiled for the CPU's widest vector instructions, chosen at run time. The crates
//! are built for the x86-64 baseline (SSE2), so that one binary runs on any x86-64 CPU, and the
//! loops the compiler vectorises then use 4 lanes where AVX-512 has 16. `pulp` (already the gemm
//! crate's dispatcher) runs a closure inside a function compiled for AVX-512 or AVX2 where the
//! CPU has them, so that the closure's loops vectorise to that width. Each arm is a pulp feature
//! (`x86-v4`, `x86-v3`), both named in this crate's manifest: Burn turns on only `x86-v4`, and
//! without `x86-v3` an AVX2 CPU ran every such loop in the baseline's 4 SSE lanes.

/// Runs `f` compiled for the widest vector instructions this CPU has. The result is the one
/// the baseline build gives: the same operations in the same order (no fast-math, no fused
/// multiply-add the code does not ask for), only more of them at once. It gains only where the
/// compiler inlines `f` into the dispatched function: a short loop, as tanh's (its samples then
/// show `zmm` registers under `perf annotate`); GroupNorm's longer row passes were not inlined,
/// and stay as they were.
#[inline(always)]
pub fn vectorised<R>(f: impl FnOnce() -> R) -> R {
    pulp::Arch::new().dispatch(f)
}

/// Lanes of [`sum_of_products`]: one AVX-512 register of f32.
const LANES: usize = 16;

/// Values per block of [`sum_of_products`], whose f32 lanes are added into the f64 total.
const BLOCK: usize = 1024;

/// Σ a_i b_i over the common length, vectorised: `LANES` f32 partial sums per block of
/// `BLOCK` values, each block's added into an f64 total, so that the rounding grows with the
/// block (about 1e-6 relative for positive terms), not with the length.
pub fn sum_of_products(a: &[f32], b: &[f32]) -> f64 {
    vectorised(|| {
        let mut total = 0.0f64;
        for (a, b) in a.chunks(BLOCK).zip(b.chunks(BLOCK)) {
            let mut lanes = [0.0f32; LANES];
            let (mut ca, mut cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
            for (x, y) in (&mut ca).zip(&mut cb) {
                for i in 0..LANES {
                    lanes[i] += x[i] * y[i];
                }
            }
            let tail: f64 = ca.remainder().iter().zip(cb.remainder()).map(|(&x, &y)| f64::from(x * y)).sum();
            total += lanes.iter().map(|&l| f64::from(l)).sum::<f64>() + tail;
        }
        total
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_of_products_equal_the_f64_sum_at_any_length() {
        for n in [0, 1, 15, 16, 17, 1023, 1024, 1025, 5000, 100_003] {
            let a: Vec<f32> = (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
            let b: Vec<f32> = (0..n).map(|i| ((i * 13 % 89) as f32 - 40.0) / 3.0).collect();
            let exact: f64 = a.iter().zip(&b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
            let scale: f64 = a.iter().zip(&b).map(|(&x, &y)| (f64::from(x) * f64::from(y)).abs()).sum();
            let got = sum_of_products(&a, &b);
            assert!((got - exact).abs() <= 1e-6 * (1.0 + scale), "{n}: {got} vs {exact}");
            let squares = sum_of_products(&a, &a);
            let want: f64 = a.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
            assert!((squares - want).abs() <= 1e-6 * (1.0 + want), "{n} squares");
        }
        assert_eq!(sum_of_products(&[1.0, 2.0, 3.0], &[4.0, 5.0]), 14.0, "the common length");
    }
}
