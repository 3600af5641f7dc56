//! One thread's GEMM on host slices (the `gemm` crate, which reads any strides, so a transposed
//! operand costs no copy), with every index checked against its slice before the unsafe call: the
//! engine's flex passes (the convolution's weight gradient, per-example gradients) run one such
//! product per example, the examples spread over the threads, and sum them in a fixed order.

use rayon::prelude::*;
use std::ops::Range;

/// Parts the examples of a sum are split into: enough to keep the threads busy; fixed, so that
/// the order of the additions does not depend on the threads.
const PARTS: usize = 16;

/// A row-major-or-not view of a matrix in a slice: element (i, j) is `values[i * rows + j * cols]`.
#[derive(Clone, Copy)]
pub(crate) struct Strided<'a> {
    /// The slice the matrix lives in.
    pub values: &'a [f32],
    /// Step between rows.
    pub rows: usize,
    /// Step between columns.
    pub cols: usize,
}

impl<'a> Strided<'a> {
    /// `values` as a row-major matrix `width` columns wide.
    pub fn row_major(values: &'a [f32], width: usize) -> Self {
        Self { values, rows: width, cols: 1 }
    }

    /// `values` as the transpose of a row-major matrix `width` columns wide.
    pub fn transposed(values: &'a [f32], width: usize) -> Self {
        Self { values, rows: 1, cols: width }
    }

    /// The transpose of this view (no copy).
    pub fn transpose(self) -> Self {
        Self { rows: self.cols, cols: self.rows, ..self }
    }

    /// Whether an [r, c] matrix with these strides lies inside the slice.
    fn holds(&self, [r, c]: [usize; 2]) -> bool {
        r == 0 || c == 0 || (r - 1) * self.rows + (c - 1) * self.cols < self.values.len()
    }
}

/// dst [m, n] (row-major) = dst + `scale` lhs rhs where lhs is [m, inner] and rhs [inner, n]
/// (`accumulate`), or = `scale` lhs rhs (not).
pub(crate) fn gemm_into(
    dst: &mut [f32],
    [m, inner, n]: [usize; 3],
    lhs: Strided,
    rhs: Strided,
    scale: f32,
    accumulate: bool,
) {
    assert!(dst.len() == m * n && lhs.holds([m, inner]) && rhs.holds([inner, n]), "GEMM operand sizes");
    if m == 0 || n == 0 {
        return;
    }
    if inner == 0 {
        if !accumulate {
            dst.fill(0.0);
        }
        return;
    }
    let stride = |s: usize| isize::try_from(s).expect("a tensor dimension fits isize");
    // SAFETY: dst holds exactly the row-major [m, n] matrix and lhs and rhs every element their
    // strides address (checked above, m, n and inner non-zero); dst is a unique borrow, so it
    // aliases neither operand.
    unsafe {
        gemm::gemm(
            m,
            n,
            inner,
            dst.as_mut_ptr(),
            1,
            stride(n),
            accumulate,
            lhs.values.as_ptr(),
            stride(lhs.cols),
            stride(lhs.rows),
            rhs.values.as_ptr(),
            stride(rhs.cols),
            stride(rhs.rows),
            1.0,
            scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// The sum over examples 0..`examples` of what `add` accumulates into a zeroed buffer of `len`:
/// fixed ranges of examples (at most [`PARTS`], each of `fewest` examples or more) summed in
/// parallel, the partial sums then added in order. The result has the same bits whatever the
/// threads do, so a resumed run repeats the uninterrupted one (a work-stealing reduction adds in
/// whatever order the threads finish). Each part zeroes, writes and hands back a buffer of
/// `len`: `fewest` keeps that traffic small against the part's work where `len` is large.
pub(crate) fn sum_over_examples(
    examples: usize,
    fewest: usize,
    len: usize,
    add: impl Fn(&mut [f32], Range<usize>) + Sync,
) -> Vec<f32> {
    let part = examples.div_ceil(PARTS).max(fewest).max(1);
    let partials: Vec<Vec<f32>> = (0..examples.div_ceil(part))
        .into_par_iter()
        .map(|i| {
            let mut acc = vec![0.0f32; len];
            add(&mut acc, i * part..((i + 1) * part).min(examples));
            acc
        })
        .collect();
    let mut total = vec![0.0f32; len];
    for partial in partials {
        total.iter_mut().zip(partial).for_each(|(t, v)| *t += v);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The product by its definition.
    fn naive(m: usize, inner: usize, n: usize, lhs: Strided, rhs: Strided) -> Vec<f32> {
        let at = |s: &Strided, i: usize, j: usize| s.values[i * s.rows + j * s.cols];
        (0..m)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .map(|(i, j)| (0..inner).map(|p| at(&lhs, i, p) * at(&rhs, p, j)).sum())
            .collect()
    }

    #[test]
    fn products_of_plain_and_transposed_operands_accumulate_as_asked() {
        let (m, inner, n) = (3, 5, 4);
        let a: Vec<f32> = (0..m * inner).map(|v| v as f32 * 0.5 - 3.0).collect();
        let b: Vec<f32> = (0..inner * n).map(|v| 2.0 - v as f32 * 0.25).collect();
        let (lhs, rhs) = (Strided::row_major(&a, inner), Strided::transposed(&b, inner));
        let want = naive(m, inner, n, lhs, rhs);
        let mut dst = vec![7.0; m * n];
        gemm_into(&mut dst, [m, inner, n], lhs, rhs, 2.0, false);
        dst.iter().zip(&want).for_each(|(d, w)| assert!((d - 2.0 * w).abs() < 1e-4, "{d} vs 2 x {w}"));
        gemm_into(&mut dst, [m, inner, n], lhs, rhs, -1.0, true);
        dst.iter().zip(&want).for_each(|(d, w)| assert!((d - w).abs() < 1e-4, "{d} vs {w}"));
    }

    #[test]
    fn a_sum_over_examples_visits_each_once_and_repeats_its_bits() {
        let value = |e: usize| 1.0 / (e as f32 + 3.0);
        let sum = |n, fewest| {
            sum_over_examples(n, fewest, 2, |acc, examples| {
                for e in examples {
                    acc[0] += value(e);
                    acc[1] += 1.0;
                }
            })
        };
        for (n, fewest) in [0, 1, 15, 16, 17, 1000].into_iter().flat_map(|n| [(n, 0), (n, 1), (n, 7), (n, 2000)]) {
            let got = sum(n, fewest);
            assert_eq!(got[1], n as f32, "{n} examples each visited once");
            let want: f64 = (0..n).map(|e| f64::from(value(e))).sum();
            assert!((f64::from(got[0]) - want).abs() <= 1e-5 * (1.0 + want), "{n}: {} vs {want}", got[0]);
            assert!((0..20).all(|_| sum(n, fewest)[0].to_bits() == got[0].to_bits()), "{n}: the same bits every time");
        }
    }

    #[test]
    #[should_panic(expected = "GEMM operand sizes")]
    fn an_operand_too_short_for_its_strides_is_refused() {
        let a = vec![1.0; 5];
        let mut dst = vec![0.0; 4];
        gemm_into(&mut dst, [2, 3, 2], Strided::row_major(&a, 3), Strided::row_major(&a, 2), 1.0, false);
    }
}
