//! The Gram matrix A^T A [P, P] of one example's convolution patches A [C kh kw, P], and their
//! column sums, from the example's input x [C, H, W] itself: for stride 1 the patches of output
//! pixels p and q hold the pixels p + t and q + t for each kernel tap t (zero in the padding), so
//! <a_p, a_q> = Σ_t <x_(p+t), x_(q+t)> over the taps where both lie inside the input. The
//! C-long products are taken once per pair of input pixels (one GEMM, X^T X [HW, HW]) and the
//! taps add shifted blocks of it: (HW)^2 C + taps P^2 operations against the unfolded Gram's
//! P^2 C taps, about 9 times fewer for a 3x3 convolution that keeps its size. The ghost norms of
//! `grad_sample::host_products` read it where it is cheaper ([`cheaper_cost`]).

use super::gemm::{Strided, gemm_into};
use dp_kernels::Patches;
use dp_kernels::vectorised::vectorised;

/// The operations of one example's A^T A from its pixels, for input [C, H, W] and the
/// convolution `patches`, where fewer than the unfolded Gram's P^2 C kh kw; None where they are
/// not, or where it does not apply (a stride other than 1: the shifted blocks would be strided,
/// and the pixels the taps skip would be multiplied for nothing).
pub(crate) fn cheaper_cost(patches: &Patches, [c, h, w]: [usize; 3]) -> Option<usize> {
    if patches.stride != [1, 1] {
        return None;
    }
    let [ho, wo] = patches.output_size([h, w]);
    let (pixels, positions) = (h * w, (ho * wo).saturating_mul(ho * wo));
    let taps = patches.kernel[0] * patches.kernel[1];
    let cost = pixels.saturating_mul(pixels).saturating_mul(c).saturating_add(taps.saturating_mul(positions));
    (cost < positions.saturating_mul(c * taps)).then_some(cost)
}

/// Scratch values [`gram`] needs for input [H, W]: the pixels' Gram.
pub(crate) fn scratch_len([h, w]: [usize; 2]) -> usize {
    (h * w) * (h * w)
}

/// `out` [P, P] = A^T A of the patches of `x` [C, H, W] (`shape`) for the stride-1 convolution
/// `patches`, with `pixels` scratch of [`scratch_len`].
pub(crate) fn gram(x: &[f32], shape: [usize; 3], patches: &Patches, pixels: &mut [f32], out: &mut [f32]) {
    let [c, h, w] = shape;
    let [ho, wo] = patches.output_size([h, w]);
    let (hw, p) = (h * w, ho * wo);
    assert!(
        patches.stride == [1, 1] && x.len() == c * hw && pixels.len() >= hw * hw && out.len() == p * p,
        "patch Gram operand sizes"
    );
    let pixels = &mut pixels[..hw * hw];
    let xs = Strided::row_major(x, hw);
    gemm_into(pixels, [hw, c, hw], xs.transpose(), xs, 1.0, false);
    out.fill(0.0);
    let pixels = &*pixels;
    vectorised(
        #[inline(always)]
        || {
            for tap in taps(patches, [h, w]) {
                let (rows, cols) = (&tap.rows, &tap.cols);
                let len = cols.len();
                for i in rows.clone() {
                    for j in cols.clone() {
                        let from = tap.input([i, j], w) * hw;
                        let to = (i * wo + j) * p;
                        for i2 in rows.clone() {
                            let src = from + tap.input([i2, cols.start], w);
                            let dst = &mut out[to + i2 * wo + cols.start..][..len];
                            dst.iter_mut().zip(&pixels[src..src + len]).for_each(|(o, &v)| *o += v);
                        }
                    }
                }
            }
        },
    );
}

/// `out` [P] = the column sums of the patches of `x` [C, H, W] (`shape`) for the stride-1
/// convolution `patches`: Σ_t of the channel sums at p + t, with `scratch` of at least H W.
pub(crate) fn column_sums(x: &[f32], shape: [usize; 3], patches: &Patches, scratch: &mut [f32], out: &mut [f32]) {
    let [c, h, w] = shape;
    let [ho, wo] = patches.output_size([h, w]);
    assert!(
        patches.stride == [1, 1] && x.len() == c * h * w && scratch.len() >= h * w && out.len() == ho * wo,
        "patch column sum operand sizes"
    );
    let sums = &mut scratch[..h * w];
    sums.fill(0.0);
    for channel in x.chunks_exact(h * w) {
        sums.iter_mut().zip(channel).for_each(|(s, &v)| *s += v);
    }
    out.fill(0.0);
    for tap in taps(patches, [h, w]) {
        for i in tap.rows.clone() {
            let from = tap.input([i, tap.cols.start], w);
            let dst = &mut out[i * wo + tap.cols.start..][..tap.cols.len()];
            dst.iter_mut().zip(&sums[from..]).for_each(|(o, &v)| *o += v);
        }
    }
}

/// One kernel tap of a stride-1 convolution: output pixel (i, j) reads input pixel
/// (i + down - top, j + right - left), inside the input for i in `rows` and j in `cols`.
struct Tap {
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    down: usize,
    right: usize,
    /// The padding's top rows times the input's width plus its left columns, subtracted last
    /// from a flat index (every index stays unsigned).
    offset: usize,
}

impl Tap {
    /// The flat input index of output pixel (i, j), inside `rows` and `cols`, for an input `w`
    /// wide.
    fn input(&self, [i, j]: [usize; 2], w: usize) -> usize {
        (i + self.down) * w + j + self.right - self.offset
    }
}

/// The taps of the stride-1 convolution `patches` over an input [H, W] whose output pixels read
/// some input pixel.
fn taps(patches: &Patches, [h, w]: [usize; 2]) -> impl Iterator<Item = Tap> {
    let [ho, wo] = patches.output_size([h, w]);
    let ([kh, kw], [dh, dw], [top, left]) = (patches.kernel, patches.dilation, patches.padding);
    // Output index o reads o + reach - pad: inside [0, n) for o in [pad - reach, n + pad - reach).
    let inside = |reach: usize, pad: usize, n: usize, outputs: usize| {
        pad.saturating_sub(reach)..(n + pad).saturating_sub(reach).min(outputs)
    };
    (0..kh * kw).filter_map(move |t| {
        let (down, right) = (t / kw * dh, t % kw * dw);
        let (rows, cols) = (inside(down, top, h, ho), inside(right, left, w, wo));
        (!rows.is_empty() && !cols.is_empty()).then_some(Tap { rows, cols, down, right, offset: top * w + left })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dp_kernels::im2col::unfold_example;

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * 7919 + seed * 104_729) % 1013) as f32 / 1013.0 - 0.5).collect()
    }

    /// A^T A and A's column sums by their definition: the patches unfolded, every pair's dot
    /// product in f64.
    fn unfolded(x: &[f32], [c, h, w]: [usize; 3], patches: &Patches) -> (Vec<f64>, Vec<f64>) {
        let [ho, wo] = patches.output_size([h, w]);
        let (k, p) = (c * patches.kernel[0] * patches.kernel[1], ho * wo);
        let mut a = vec![0.0f32; k * p];
        unfold_example(x, [c, h, w], patches, &mut a);
        let at = |r: usize, q: usize| f64::from(a[r * p + q]);
        let gram = (0..p * p).map(|i| (0..k).map(|r| at(r, i / p) * at(r, i % p)).sum()).collect();
        let sums = (0..p).map(|q| (0..k).map(|r| at(r, q)).sum()).collect();
        (gram, sums)
    }

    #[test]
    fn the_gram_and_sums_equal_the_unfolded_patches_on_ragged_shapes() {
        let shapes = [
            ([3, 5, 7], [3, 3], [1, 1], [1, 1]),
            ([2, 6, 4], [3, 3], [0, 0], [1, 1]),
            ([4, 5, 5], [3, 3], [2, 1], [1, 1]),
            ([1, 7, 6], [3, 2], [1, 0], [2, 1]),
            ([5, 4, 4], [1, 1], [0, 0], [1, 1]),
            ([2, 3, 3], [5, 5], [2, 2], [1, 1]),
        ];
        for (seed, (shape, kernel, padding, dilation)) in shapes.into_iter().enumerate() {
            let patches = Patches { kernel, stride: [1, 1], padding, dilation };
            let [c, h, w] = shape;
            let [ho, wo] = patches.output_size([h, w]);
            let p = ho * wo;
            let x = values(c * h * w, seed);
            let (mut pixels, mut out, mut sums) = (vec![0.0; scratch_len([h, w])], vec![0.0; p * p], vec![0.0; p]);
            gram(&x, shape, &patches, &mut pixels, &mut out);
            column_sums(&x, shape, &patches, &mut pixels, &mut sums);
            let (want_gram, want_sums) = unfolded(&x, shape, &patches);
            for (got, want) in out.iter().zip(&want_gram).chain(sums.iter().zip(&want_sums)) {
                assert!((f64::from(*got) - want).abs() <= 1e-5 * (1.0 + want.abs()), "{shape:?}: {got} vs {want}");
            }
        }
    }

    #[test]
    fn the_cost_is_the_pixels_gram_and_the_shifts_where_cheaper() {
        let same = Patches { kernel: [3, 3], stride: [1, 1], padding: [1, 1], dilation: [1, 1] };
        assert_eq!(cheaper_cost(&same, [256, 8, 8]), Some(64 * 64 * 256 + 9 * 64 * 64));
        assert_eq!(cheaper_cost(&Patches { stride: [2, 2], ..same }, [256, 8, 8]), None);
        // A 1x1 kernel's patches are its pixels: nothing to save.
        let pointwise = Patches { kernel: [1, 1], padding: [0, 0], ..same };
        assert_eq!(cheaper_cost(&pointwise, [16, 8, 8]), None);
    }
}
