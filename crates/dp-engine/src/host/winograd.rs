//! A 3x3 stride-1 convolution on the host by Winograd's minimal filtering F(2x2, 3x3) (Lavin and
//! Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): each 2x2 tile of outputs is
//! A^T [(G g G^T) ⊙ (B^T d B)] A for its 4x4 input tile d, so that the channels meet in 16 GEMMs
//! of [C_out, C_in] by [C_in, tiles], 16 multiply-adds per tile and channel pair where the
//! unfolded GEMM takes 36 (2.25 times fewer). The transforms are additions only (G's halves
//! are exact in binary), O((C_in + C_out) P) against the GEMMs' O(C_in C_out P): it pays where
//! both channel counts are large ([`pays`]). The examples are taken a few at a time
//! ([`examples_per_part`]), each part on one thread and written to its own examples' outputs (the
//! result does not depend on the threads). The same routine is the convolution's input gradient:
//! the output gradient correlated with the weight flipped and transposed, padded by 2 - p; the
//! summed weight gradient ([`weight_grad`]) is the adjoint of the transform, in fixed parts, and
//! one example's own ([`per_example`]) the same adjoint over that example's tiles.

use super::buffers::Reused;
use super::gemm::{Strided, gemm_into, sum_over_examples};
use super::machine::second_level_cache;
use dp_kernels::Patches;
use dp_kernels::vectorised::vectorised;
use rayon::prelude::*;

pub(crate) mod per_example;

/// Values of a transformed tile (4x4).
const TILE: usize = 16;

/// Whether a convolution of `patches` from x [B, C_in, H, W] (none empty) to `c_out` channels
/// goes by F(2x2, 3x3): a 3x3 kernel at stride 1, undilated, padded by at most 2 (so that its
/// input gradient is the same correlation, padded by 2 - p), between channel counts where it
/// pays.
pub(crate) fn applies(patches: &Patches, [b, c_in, h, w]: [usize; 4], c_out: usize) -> bool {
    let shape = patches.kernel == [3, 3] && patches.stride == [1, 1] && patches.dilation == [1, 1];
    shape && patches.padding.iter().all(|&p| p <= 2) && b * h * w > 0 && pays(c_in, c_out)
}

/// Whether F(2x2, 3x3) pays for `c_in` to `c_out` channels: its GEMMs save 20 multiply-adds
/// per tile and channel pair (36 - 16), its transforms cost a few dozen additions per tile and
/// channel on either side, so it wins once both counts reach a few dozen. Measured on the AMD
/// EPYC VM (forward passes, docs/BENCHMARKS.md, issue 53): 64 to 64 channels at 32x32 in 17.3 ms
/// against 28.1 for the unfolded GEMM, 16 to 64 a tie (7.4 and 7.2), 16 to 16 4.6 against 5.9,
/// 8 to 32 a loss (5.1 against 4.3).
fn pays(c_in: usize, c_out: usize) -> bool {
    c_in >= MIN_CHANNELS && c_out >= MIN_CHANNELS
}

/// The fewest channels on each side for which [`pays`] holds.
const MIN_CHANNELS: usize = 16;

/// The weight [C_out, C_in, 3, 3] transformed to U [16, C_out, C_in], U[.., o, i] = G g_oi G^T;
/// `transposed` reads the weight as W'[i, o] = W[o, i] flipped in both axes (the input
/// gradient's kernel) with `c_out` and `c_in` its own. Per output channel, its nine taps are
/// gathered as rows over the input channels, so that each pass of G is one vectorised loop
/// across them.
pub(crate) fn transformed_weight(weight: &[f32], [c_out, c_in]: [usize; 2], transposed: bool) -> Vec<f32> {
    let mut u = vec![0.0f32; TILE * c_out * c_in];
    // The taps (r, s) as rows [9, C_in], G g as rows [3 columns s, 4 rows a, C_in], then
    // (G g) G^T as rows [16, C_in].
    let (mut taps, mut columns, mut tiles) =
        (vec![0.0f32; 9 * c_in], vec![0.0f32; 12 * c_in], vec![0.0f32; TILE * c_in]);
    for o in 0..c_out {
        for (i, tap) in (0..c_in).flat_map(|i| (0..9).map(move |tap| (i, tap))) {
            taps[tap * c_in + i] = match transposed {
                false => weight[(o * c_in + i) * 9 + tap],
                true => weight[(i * c_out + o) * 9 + 8 - tap],
            };
        }
        vectorised(
            #[inline(always)]
            || {
                for s in 0..3 {
                    let tap = |r: usize| &taps[(r * 3 + s) * c_in..][..c_in];
                    g_rows(&mut columns[s * 4 * c_in..][..4 * c_in], [tap(0), tap(1), tap(2)]);
                }
                for a in 0..4 {
                    let column = |s: usize| &columns[(s * 4 + a) * c_in..][..c_in];
                    g_rows(&mut tiles[a * 4 * c_in..][..4 * c_in], [column(0), column(1), column(2)]);
                }
            },
        );
        for (xi, row) in tiles.chunks_exact(c_in.max(1)).enumerate() {
            u[(xi * c_out + o) * c_in..][..c_in].copy_from_slice(row);
        }
    }
    u
}

/// G v of three rows (v0, v1, v2) into the four rows of `out`: v0, (v0 + v1 + v2) / 2,
/// (v0 - v1 + v2) / 2 and v2, elementwise.
#[inline(always)]
fn g_rows(out: &mut [f32], [v0, v1, v2]: [&[f32]; 3]) {
    let n = v0.len();
    let (first, rest) = out.split_at_mut(n);
    let (sum, rest) = rest.split_at_mut(n);
    let (difference, last) = rest.split_at_mut(n);
    first.copy_from_slice(v0);
    last.copy_from_slice(v2);
    for ((((p, m), &x), &y), &z) in sum.iter_mut().zip(difference.iter_mut()).zip(v0).zip(v1).zip(v2) {
        *p = 0.5 * (x + y + z);
        *m = 0.5 * (x - y + z);
    }
}

/// The geometry of one call: [B, C_in, H, W] in, C_out, the padding, the output [H', W'] and
/// the tiles [rows, columns] per example.
#[derive(Clone, Copy)]
struct Geometry {
    input: [usize; 4],
    c_out: usize,
    padding: [usize; 2],
    output: [usize; 2],
    tiles: [usize; 2],
}

impl Geometry {
    /// The geometry of a correlation of x [B, C_in, H, W] to `c_out` channels padded by `padding`.
    fn new(input: [usize; 4], c_out: usize, padding: [usize; 2]) -> Self {
        let output = [input[2] + 2 * padding[0] - 2, input[3] + 2 * padding[1] - 2];
        Self { input, c_out, padding, output, tiles: output.map(|n| n.div_ceil(2)) }
    }

    /// The width of a phase plane (`input_tiles`): one more than the tiles in a row.
    fn width(&self) -> usize {
        self.tiles[1] + 1
    }

    /// The columns of the GEMMs per example: every tile, and one more per tile row that no
    /// output reads (the flat passes run across the ends of the rows).
    fn per_example(&self) -> usize {
        self.tiles[0] * self.width()
    }

    /// Values of a phase plane: rows + 1 rows of [`Self::width`], and one more read past the
    /// last.
    fn phase(&self) -> usize {
        (self.tiles[0] + 1) * self.width() + 1
    }
}

/// y [B, C_out, H + 2 p_h - 2, W + 2 p_w - 2] = the correlation of x [B, C_in, H, W] (values
/// `x`, zero outside) with the 3x3 kernels whose transform is `u` (from [`transformed_weight`],
/// [16, C_out, C_in]), padded by `padding`. The caller checks that the output is not empty.
pub(crate) fn conv3x3(x: &[f32], input: [usize; 4], u: &[f32], c_out: usize, padding: [usize; 2], y: &mut [f32]) {
    let [b, c_in, h, w] = input;
    let geometry = Geometry::new(input, c_out, padding);
    let output = geometry.output;
    assert!(
        x.len() == b * c_in * h * w && u.len() == TILE * c_out * c_in && y.len() == b * c_out * output[0] * output[1],
        "Winograd operand sizes"
    );
    let examples = examples_per_part(&geometry);
    let (x_part, y_part) = (examples * c_in * h * w, examples * c_out * output[0] * output[1]);
    y.par_chunks_mut(y_part)
        .zip(x.par_chunks(x_part))
        .for_each_init(|| Scratch::new(&geometry, examples), |scratch, (y, x)| part(x, y, u, &geometry, scratch));
}

/// Examples per part: as many as keep its transformed input and output tiles, 16 (C_in + C_out)
/// floats per column, within the second-level cache (256 KiB where the system does not say),
/// but enough for [`MIN_COLUMNS`] (each GEMM packs its [C_out, C_in] operand again: fewer
/// columns and the packing outweighs the product), and few enough that every thread has two
/// parts. Measured on the zoo's layers (docs/BENCHMARKS.md, issue 53): 64 columns beat 128,
/// 256 and 512 where the channels number 128 or more, and tie below.
fn examples_per_part(g: &Geometry) -> usize {
    let cache = second_level_cache().unwrap_or(256 << 10) as usize;
    let per_example = TILE * (g.input[1] + g.c_out) * g.per_example() * size_of::<f32>();
    let fitting = (cache / per_example.max(1)).max(MIN_COLUMNS.div_ceil(g.per_example()));
    let spread = g.input[0].div_ceil(2 * rayon::current_num_threads()).max(1);
    fitting.min(spread)
}

/// The fewest GEMM columns of a part (unless the batch has fewer).
const MIN_COLUMNS: usize = 64;

/// One thread's buffers: the transformed inputs V [16, C_in, columns] and products M [16,
/// C_out, columns] of a part, and the planes of one channel.
struct Scratch {
    v: Reused,
    m: Reused,
    planes: Planes,
}

/// One channel's planes: its padded input's four phases, then the eight of its transform along
/// the columns (or the eight of A^T m, then the output's four phases).
struct Planes {
    phases: Vec<f32>,
    sums: Vec<f32>,
}

impl Scratch {
    fn new(g: &Geometry, examples: usize) -> Self {
        let columns = examples * g.per_example();
        Self {
            v: Reused::take(TILE * (g.input[1] * columns)),
            m: Reused::take(TILE * (g.c_out * columns)),
            planes: Planes { phases: vec![0.0; 4 * g.phase()], sums: vec![0.0; 8 * g.phase()] },
        }
    }
}

/// The convolution of the examples of one part: x [E, C_in, H, W] into y [E, C_out, H', W'].
fn part(x: &[f32], y: &mut [f32], u: &[f32], g: &Geometry, s: &mut Scratch) {
    let c_in = g.input[1];
    let (columns, lane_v) = transform_inputs(x, g, s);
    let lane_m = g.c_out * columns;
    let (v, m) = (s.v.values(), &mut s.m.values_mut()[..TILE * lane_m]);
    for xi in 0..TILE {
        let (lhs, rhs) = (&u[xi * g.c_out * c_in..][..g.c_out * c_in], &v[xi * lane_v..][..c_in * columns]);
        let dst = &mut m[xi * lane_m..][..g.c_out * columns];
        let [lhs, rhs] = [Strided::row_major(lhs, c_in), Strided::row_major(rhs, columns)];
        gemm_into(dst, [g.c_out, c_in, columns], lhs, rhs, 1.0, false);
    }
    // Each transform's closure is inlined into the function `vectorised` dispatches to, so that
    // its loops compile for that vector width (an ordinary closure this long stays a function of
    // its own, compiled for the baseline's 4 lanes).
    vectorised(
        #[inline(always)]
        || outputs(y, m, [columns, lane_m], g, &mut s.planes),
    );
}

/// [`output_tiles`] of every channel of the examples y [E, C_out, H', W'] of a part.
#[inline(always)]
fn outputs(y: &mut [f32], m: &[f32], [columns, lane]: [usize; 2], g: &Geometry, planes: &mut Planes) {
    let [ho, wo] = g.output;
    for (e, example) in y.chunks_exact_mut(g.c_out * ho * wo).enumerate() {
        for (o, channel) in example.chunks_exact_mut(ho * wo).enumerate() {
            output_tiles(m, o * columns + e * g.per_example(), lane, g, planes, channel);
        }
    }
}

/// V [16, C_in, columns] of the examples x [E, C_in, H, W] into the scratch's `v`: (the
/// columns, the distance between two of the 16 matrices).
fn transform_inputs(x: &[f32], g: &Geometry, s: &mut Scratch) -> (usize, usize) {
    let [_, c_in, h, w] = g.input;
    let columns = x.len() / (c_in * h * w) * g.per_example();
    let lane = c_in * columns;
    let v = &mut s.v.values_mut()[..TILE * lane];
    vectorised(
        #[inline(always)]
        || inputs(x, v, [columns, lane], g, &mut s.planes),
    );
    (columns, lane)
}

/// [`input_tiles`] of every channel of the examples x [E, C_in, H, W] of a part.
#[inline(always)]
fn inputs(x: &[f32], v: &mut [f32], [columns, lane]: [usize; 2], g: &Geometry, planes: &mut Planes) {
    let [_, c_in, h, w] = g.input;
    for (e, example) in x.chunks_exact(c_in * h * w).enumerate() {
        for (c, channel) in example.chunks_exact(h * w).enumerate() {
            input_tiles(channel, g, planes, v, c * columns + e * g.per_example(), lane);
        }
    }
}

/// The weight gradient Σ_b s_b G_b ⋆ x_b of the correlation of x [B, C_in, H, W] (`input`)
/// padded by `padding`, given its output gradient `grad` [B, C_out, H', W'], with the factors
/// `scales` s [B] (one each when None), as its transpose [C_in 9, C_out] (row i 9 + 3 r + s the
/// tap (r, s) of input channel i, the unfolded patches' order): in the transformed domain the
/// gradient of U^T is Σ_tiles (B^T d B) ⊙ (A dY A^T), 16 GEMMs of [C_in, columns] by [columns,
/// C_out] over all the tiles of a part, and the kernel's is G^T dU G ([`back_transform`]). The
/// examples are summed over fixed parts (`sum_over_examples`: the same bits on every run).
pub(crate) fn weight_grad(
    x: &[f32],
    input: [usize; 4],
    grad: &[f32],
    c_out: usize,
    padding: [usize; 2],
    scales: Option<&[f32]>,
) -> Vec<f32> {
    let [b, c_in, h, w] = input;
    let g = Geometry::new(input, c_out, padding);
    let [ho, wo] = g.output;
    assert!(
        x.len() == b * c_in * h * w && grad.len() == b * c_out * ho * wo && scales.is_none_or(|s| s.len() == b),
        "Winograd operand sizes"
    );
    let examples = examples_per_part(&g);
    let du = sum_over_examples(b, SUM_COLUMNS.div_ceil(g.per_example()), TILE * c_in * c_out, |acc, range| {
        let mut s = Scratch::new(&g, examples);
        for start in range.clone().step_by(examples) {
            let chunk = start..(start + examples).min(range.end);
            let [x, grad] =
                [(x, c_in * h * w), (grad, c_out * ho * wo)].map(|(t, n)| &t[chunk.start * n..chunk.end * n]);
            let scales = scales.map(|s| &s[chunk]);
            transformed_product(x, grad, scales, &g, &mut s, acc, true);
        }
    });
    let mut dw = vec![0.0f32; 9 * c_in * c_out];
    back_transform(&du, [c_in, c_out], &mut vec![0.0; 12 * c_out], &mut dw);
    dw
}

/// dU^T = Σ_b s_b (B^T d_b B) (A dY_b A^T)^T [16, C_in, C_out] over the tiles of the examples x
/// [E, C_in, H, W] and their output gradients `grad` [E, C_out, H', W'], with the factors
/// `scales` s [E] (one each when None): 16 GEMMs over the part's columns, added into `du` where
/// `accumulate` (a part of a sum), written over it otherwise (one example's).
fn transformed_product(
    x: &[f32],
    grad: &[f32],
    scales: Option<&[f32]>,
    g: &Geometry,
    s: &mut Scratch,
    du: &mut [f32],
    accumulate: bool,
) {
    let ([_, c_in, _, _], c_out) = (g.input, g.c_out);
    let (columns, lane_v) = transform_inputs(x, g, s);
    let lane_z = c_out * columns;
    let z = &mut s.m.values_mut()[..TILE * lane_z];
    vectorised(
        #[inline(always)]
        || gradients(grad, scales, z, [columns, lane_z], g, &mut s.planes),
    );
    let v = s.v.values();
    for xi in 0..TILE {
        let lhs = Strided::row_major(&v[xi * lane_v..][..c_in * columns], columns);
        let rhs = Strided::transposed(&z[xi * lane_z..][..c_out * columns], columns);
        let dst = &mut du[xi * c_in * c_out..][..c_in * c_out];
        gemm_into(dst, [c_in, columns, c_out], lhs, rhs, 1.0, accumulate);
    }
}

/// G^T M G of every channel pair of `products` M^T [16, C_in, C_out] into `taps` [C_in 9, C_out]
/// (row i 9 + 3 r + s the tap (r, s) of input channel i), a whole row of output channels at a
/// time: one input channel's 16 rows read contiguously, G^T along the columns q of each row a of
/// the tile into `rows` [4, 3, C_out], then along the rows into its nine taps.
fn back_transform(products: &[f32], [c_in, c_out]: [usize; 2], rows: &mut [f32], taps: &mut [f32]) {
    vectorised(
        #[inline(always)]
        || {
            for (i, taps) in taps.chunks_exact_mut(9 * c_out).enumerate() {
                let m = |xi: usize| &products[(xi * c_in + i) * c_out..][..c_out];
                for (a, row) in rows.chunks_exact_mut(3 * c_out).enumerate() {
                    g_t_rows(row, [m(4 * a), m(4 * a + 1), m(4 * a + 2), m(4 * a + 3)], 1);
                }
                let rows: &[f32] = rows;
                for s in 0..3 {
                    let row = |a: usize| &rows[(3 * a + s) * c_out..][..c_out];
                    g_t_rows(&mut taps[s * c_out..], [row(0), row(1), row(2), row(3)], 3);
                }
            }
        },
    );
}

/// G^T x of four rows (x0, x1, x2, x3) elementwise into three rows of `out`, the k-th at
/// `out[k stride n..]` (n the rows' length): x0 + (x1 + x2) / 2, (x1 - x2) / 2 and
/// (x1 + x2) / 2 + x3.
#[inline(always)]
fn g_t_rows(out: &mut [f32], [x0, x1, x2, x3]: [&[f32]; 4], stride: usize) {
    let n = x0.len();
    let (first, rest) = out.split_at_mut(stride * n);
    let (second, rest) = rest.split_at_mut(stride * n);
    let terms = first[..n].iter_mut().zip(&mut second[..n]).zip(&mut rest[..n]);
    for ((((((p, d), q), &a), &b), &c), &e) in terms.zip(x0).zip(x1).zip(x2).zip(x3) {
        let half_sum = 0.5 * (b + c);
        (*p, *d, *q) = (a + half_sum, 0.5 * (b - c), half_sum + e);
    }
}

/// [`gradient_tiles`] of every channel of the output gradients [E, C_out, H', W'] of a part,
/// each example's times its factor (one where None).
#[inline(always)]
fn gradients(
    grad: &[f32],
    scales: Option<&[f32]>,
    z: &mut [f32],
    [columns, lane]: [usize; 2],
    g: &Geometry,
    planes: &mut Planes,
) {
    let [ho, wo] = g.output;
    for (e, example) in grad.chunks_exact(g.c_out * ho * wo).enumerate() {
        let scale = scales.map_or(1.0, |s| s[e]);
        for (o, channel) in example.chunks_exact(ho * wo).enumerate() {
            gradient_tiles(channel, scale, g, planes, z, o * columns + e * g.per_example(), lane);
        }
    }
}

/// The fewest GEMM columns (tiles) of each of [`weight_grad`]'s parts, whose 16 [C_out, C_in]
/// sums are zeroed, accumulated and added once per part: where the tiles are few (8x8 inputs)
/// and the channels many, more parts cost more in those sums than they share in work. Measured
/// on the AMD EPYC VM (docs/BENCHMARKS.md, issue 53; min of 18, ms): WRN-16-4's 256 to 256
/// channels at 8x8, lot 64, 27.1 against 32.9 with a part per 4 examples (34.4 for the
/// unfolded GEMM); 128 to 128 at 8x8, lot 128, 12.7 against 14.0; 1024 columns no better.
const SUM_COLUMNS: usize = 512;

/// A dY A^T of every tile of one channel's output gradient dY [H', W'] times `scale`, written to
/// `z[offset + xi * stride + t]` in the columns of [`input_tiles`] (zero in the column no output
/// reads, so that the sum over columns sees only tiles): dY split into its four phases Y_rs
/// (zero beyond the output), each value of the transform a signed sum of them.
#[inline(always)]
fn gradient_tiles(
    channel: &[f32],
    scale: f32,
    g: &Geometry,
    s: &mut Planes,
    z: &mut [f32],
    offset: usize,
    stride: usize,
) {
    let ([_, wo], width, n) = (g.output, g.width(), g.per_example());
    let phases = &mut s.phases[..4 * n];
    phases.fill(0.0);
    for (row, values) in channel.chunks_exact(wo).enumerate() {
        let at = (row % 2) * 2 * n + row / 2 * width;
        let (even, odd) = phases[at..].split_at_mut(n);
        let pairs = values.chunks_exact(2);
        if let [last] = pairs.remainder() {
            even[wo / 2] = scale * last;
        }
        for ((pair, x), y) in pairs.zip(even.iter_mut()).zip(odd.iter_mut()) {
            *x = scale * pair[0];
            *y = scale * pair[1];
        }
    }
    // A (y0, y1) = (y0, y0 + y1, y0 - y1, -y1) along each axis: coefficients of Y_0s and Y_1s.
    const A: [[f32; 2]; 4] = [[1.0, 0.0], [1.0, 1.0], [1.0, -1.0], [0.0, -1.0]];
    let phase = |i: usize| &phases[i * n..][..n];
    let (y00, y01, y10, y11) = (phase(0), phase(1), phase(2), phase(3));
    for (a, [ra0, ra1]) in A.into_iter().enumerate() {
        for (q, [cq0, cq1]) in A.into_iter().enumerate() {
            let dst = &mut z[offset + (a * 4 + q) * stride..][..n];
            let coefficients = [ra0 * cq0, ra0 * cq1, ra1 * cq0, ra1 * cq1];
            for ((((d, &p), &q), &r), &t) in dst.iter_mut().zip(y00).zip(y01).zip(y10).zip(y11) {
                *d = coefficients[0] * p + coefficients[1] * q + coefficients[2] * r + coefficients[3] * t;
            }
        }
    }
}

/// B^T d B of every tile of one channel, written to `v[offset + xi * stride + t]` for the
/// channel's t-th column. The padded input is split into its four phases P_rc (the rows 2i + r
/// and columns 2j + c), each a flat [rows + 1, width] plane: element (u, v) of tile (i, j) is
/// P_{u mod 2, v mod 2} at flat index i width + j, shifted by width for u >= 2 and by one for
/// v >= 2, so that each pass of the transform is one long loop over shifted flat slices (the
/// last column of each row is computed and not read).
#[inline(always)]
fn input_tiles(channel: &[f32], g: &Geometry, s: &mut Planes, v: &mut [f32], offset: usize, stride: usize) {
    let (w, width, len, n) = (g.input[3], g.width(), g.phase(), g.per_example());
    let [top, left] = g.padding;
    s.phases.fill(0.0);
    let (even_rows, odd_rows) = s.phases.split_at_mut(2 * len);
    for (r, row) in channel.chunks_exact(w).enumerate() {
        // Input row r is padded row r + top, input column c padded column c + left.
        let phases = match (r + top) % 2 {
            0 => even_rows.split_at_mut(len),
            _ => odd_rows.split_at_mut(len),
        };
        let at = (r + top) / 2 * width;
        let (first, second) = match left % 2 {
            0 => (&mut phases.0[at + left / 2..], &mut phases.1[at + left / 2..]),
            _ => (&mut phases.1[at + left / 2..], &mut phases.0[at + left.div_ceil(2)..]),
        };
        // The pairs read as arrays, so that the loop vectorises (shuffles).
        let (pairs, last) = row.as_chunks::<2>();
        for ((&[x, y], a), b) in pairs.iter().zip(first.iter_mut()).zip(second.iter_mut()) {
            (*a, *b) = (x, y);
        }
        if let [last] = last {
            first[pairs.len()] = *last;
        }
    }
    // d B along the columns, per row phase r: W_r0 = P_r0 - P_r0', W_r1 = P_r1 + P_r0',
    // W_r2 = P_r0' - P_r1, W_r3 = P_r1 - P_r1' (' the next column).
    let phase = |i: usize| &s.phases[i * len..][..len];
    for r in 0..2 {
        let (p0, p1) = (phase(2 * r), phase(2 * r + 1));
        let (p0, p0_next, p1, p1_next) = (&p0[..len - 1], &p0[1..], &p1[..len - 1], &p1[1..]);
        for (q, (x, y, subtract)) in
            [(p0, p0_next, true), (p1, p0_next, false), (p0_next, p1, true), (p1, p1_next, true)]
                .into_iter()
                .enumerate()
        {
            pair(&mut s.sums[(4 * r + q) * len..][..len - 1], x, y, subtract);
        }
    }
    // B^T along the rows: V_0q = W_0q - W_0q'', V_1q = W_1q + W_0q'', V_2q = W_0q'' - W_1q,
    // V_3q = W_1q - W_1q'' ('' the next row).
    for q in 0..4 {
        let (w0, w1) = (&s.sums[q * len..][..len], &s.sums[(4 + q) * len..][..len]);
        let (w0, w0_next, w1, w1_next) = (&w0[..n], &w0[width..][..n], &w1[..n], &w1[width..][..n]);
        for (a, (x, y, subtract)) in
            [(w0, w0_next, true), (w1, w0_next, false), (w0_next, w1, true), (w1, w1_next, true)]
                .into_iter()
                .enumerate()
        {
            pair(&mut v[offset + (a * 4 + q) * stride..][..n], x, y, subtract);
        }
    }
}

/// A^T m A of every tile of one output channel, the products read from `m[offset + xi *
/// stride + t]` in the columns of [`input_tiles`]: A^T along the rows (S_0q = m_0q + m_1q +
/// m_2q, S_1q = m_1q - m_2q - m_3q), then A along the columns into the output's four phases
/// (Y_r0 = S_r0 + S_r1 + S_r2, Y_r1 = S_r1 - S_r2 - S_r3), interleaved into the channel.
#[inline(always)]
fn output_tiles(m: &[f32], offset: usize, stride: usize, g: &Geometry, s: &mut Planes, channel: &mut [f32]) {
    let ([ho, wo], width, n) = (g.output, g.width(), g.per_example());
    let at = |xi: usize| &m[offset + xi * stride..][..n];
    let (sums, phases) = (&mut s.sums[..8 * n], &mut s.phases[..4 * n]);
    for q in 0..4 {
        let (m0, m1, m2, m3) = (at(q), at(4 + q), at(8 + q), at(12 + q));
        triple(&mut sums[q * n..][..n], [m1, m0, m2], false);
        triple(&mut sums[(4 + q) * n..][..n], [m1, m2, m3], true);
    }
    for r in 0..2 {
        let sum = |q: usize| &sums[(4 * r + q) * n..][..n];
        triple(&mut phases[2 * r * n..][..n], [sum(1), sum(0), sum(2)], false);
        triple(&mut phases[(2 * r + 1) * n..][..n], [sum(1), sum(2), sum(3)], true);
    }
    for (row, dst) in channel.chunks_exact_mut(wo).enumerate().take(ho) {
        let at = (row % 2) * 2 * n + row / 2 * width;
        let (even, odd) = (&phases[at..][..width], &phases[at + n..][..width]);
        interleave(dst, even, odd);
    }
}

/// dst[2j] = even[j], dst[2j + 1] = odd[j] over dst's length (even holds ceil(len / 2) values
/// or more, odd floor(len / 2)), the pairs written as arrays, so that the loop vectorises
/// (shuffles).
#[inline(always)]
fn interleave(dst: &mut [f32], even: &[f32], odd: &[f32]) {
    let (pairs, last) = dst.as_chunks_mut::<2>();
    for ((pair, &x), &y) in pairs.iter_mut().zip(even).zip(odd) {
        *pair = [x, y];
    }
    if let [last] = last {
        *last = even[pairs.len()];
    }
}

/// dst = x + y (or x - y, `subtract`) elementwise over equal lengths.
#[inline(always)]
fn pair(dst: &mut [f32], x: &[f32], y: &[f32], subtract: bool) {
    let terms = dst.iter_mut().zip(x).zip(y);
    match subtract {
        false => terms.for_each(|((d, &x), &y)| *d = x + y),
        true => terms.for_each(|((d, &x), &y)| *d = x - y),
    }
}

/// dst = x + y + z (or x - y - z, `subtract`) elementwise over equal lengths.
#[inline(always)]
fn triple(dst: &mut [f32], [x, y, z]: [&[f32]; 3], subtract: bool) {
    let terms = dst.iter_mut().zip(x).zip(y).zip(z);
    match subtract {
        false => terms.for_each(|(((d, &x), &y), &z)| *d = x + y + z),
        true => terms.for_each(|(((d, &x), &y), &z)| *d = x - y - z),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The correlation by its definition, zero outside x.
    fn naive(x: &[f32], [b, c_in, h, w]: [usize; 4], weight: &[f32], c_out: usize, [ph, pw]: [usize; 2]) -> Vec<f32> {
        let (ho, wo) = (h + 2 * ph - 2, w + 2 * pw - 2);
        let mut y = vec![0.0f32; b * c_out * ho * wo];
        for (n, o, r, s) in (0..b)
            .flat_map(|n| (0..c_out).flat_map(move |o| (0..ho).flat_map(move |r| (0..wo).map(move |s| (n, o, r, s)))))
        {
            let mut sum = 0.0f64;
            for (i, kr, ks) in (0..c_in).flat_map(|i| (0..3).flat_map(move |kr| (0..3).map(move |ks| (i, kr, ks)))) {
                let (row, col) = ((r + kr).checked_sub(ph), (s + ks).checked_sub(pw));
                if let (Some(row), Some(col)) = (row.filter(|&v| v < h), col.filter(|&v| v < w)) {
                    sum += f64::from(x[((n * c_in + i) * h + row) * w + col])
                        * f64::from(weight[((o * c_in + i) * 3 + kr) * 3 + ks]);
                }
            }
            y[((n * c_out + o) * ho + r) * wo + s] = sum as f32;
        }
        y
    }

    pub(super) fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * 37 + seed) % 23) as f32 / 7.0 - 1.5).collect()
    }

    /// Ragged shapes ([B, C_in, H, W], C_out, padding): odd sizes (a last tile half outside), one
    /// row, each padding, one channel, examples enough for several parts of a convolution and
    /// several chunks of a sum, and tiles enough for several sums.
    pub(super) const SHAPES: [([usize; 4], usize, [usize; 2]); 7] = [
        ([3, 5, 7, 9], 4, [1, 1]),
        ([19, 17, 8, 8], 16, [1, 1]),
        ([40, 2, 30, 29], 3, [1, 1]),
        ([5, 3, 6, 5], 2, [0, 0]),
        ([1, 1, 3, 3], 1, [0, 2]),
        ([4, 2, 1, 6], 3, [1, 0]),
        ([2, 4, 4, 3], 5, [2, 2]),
    ];

    #[test]
    fn the_tiles_equal_the_correlation_by_its_definition() {
        for (input, c_out, padding) in SHAPES {
            let [b, c_in, h, w] = input;
            let x = values(b * c_in * h * w, 5);
            let weight = values(c_out * c_in * 9, 11);
            let want = naive(&x, input, &weight, c_out, padding);
            let mut got = vec![f32::NAN; want.len()];
            conv3x3(&x, input, &transformed_weight(&weight, [c_out, c_in], false), c_out, padding, &mut got);
            let worst = got.iter().zip(&want).map(|(g, e)| (g - e).abs() / e.abs().max(1.0)).fold(0.0f32, f32::max);
            assert!(worst < 1e-5, "{input:?} to {c_out} padded {padding:?}: {worst:e}");
        }
    }

    /// Σ_b s_b Σ_positions dy x over the padded input, by its definition: [C_out, C_in, 3, 3].
    pub(super) fn naive_weight_grad(
        x: &[f32],
        [b, c_in, h, w]: [usize; 4],
        dy: &[f32],
        c_out: usize,
        [ph, pw]: [usize; 2],
        scales: &[f32],
    ) -> Vec<f32> {
        let (ho, wo) = (h + 2 * ph - 2, w + 2 * pw - 2);
        let mut dw = vec![0.0f32; c_out * c_in * 9];
        for (o, i, kr, ks) in (0..c_out)
            .flat_map(|o| (0..c_in).flat_map(move |i| (0..3).flat_map(move |kr| (0..3).map(move |ks| (o, i, kr, ks)))))
        {
            let mut sum = 0.0f64;
            for (n, r, s) in (0..b).flat_map(|n| (0..ho).flat_map(move |r| (0..wo).map(move |s| (n, r, s)))) {
                let (row, col) = ((r + kr).checked_sub(ph), (s + ks).checked_sub(pw));
                if let (Some(row), Some(col)) = (row.filter(|&v| v < h), col.filter(|&v| v < w)) {
                    let g = f64::from(dy[((n * c_out + o) * ho + r) * wo + s]) * f64::from(scales[n]);
                    sum += g * f64::from(x[((n * c_in + i) * h + row) * w + col]);
                }
            }
            dw[((o * c_in + i) * 3 + kr) * 3 + ks] = sum as f32;
        }
        dw
    }

    /// The worst error of `got` [C_in 9, C_out] against `want` [C_out, C_in 9], relative to
    /// want's largest value (at least one).
    pub(super) fn worst_transposed(got: &[f32], want: &[f32], [c_in, c_out]: [usize; 2]) -> f32 {
        let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
        (0..want.len())
            .map(|j| (got[j % (9 * c_in) * c_out + j / (9 * c_in)] - want[j]).abs() / scale)
            .fold(0.0, f32::max)
    }

    /// The weight gradient, each example scaled, transposed to [C_in 9, C_out].
    #[test]
    fn the_weight_gradient_equals_its_definition() {
        for (input, c_out, padding) in SHAPES {
            let [b, c_in, h, w] = input;
            let [ho, wo] = [h + 2 * padding[0] - 2, w + 2 * padding[1] - 2];
            let x = values(b * c_in * h * w, 5);
            let dy = values(b * c_out * ho * wo, 2);
            let scales: Vec<f32> = (0..b).map(|e| 1.0 / (e as f32 + 1.5)).collect();
            let want = naive_weight_grad(&x, input, &dy, c_out, padding, &scales);
            let got = weight_grad(&x, input, &dy, c_out, padding, Some(&scales));
            let worst = worst_transposed(&got, &want, [c_in, c_out]);
            assert!(worst < 1e-5, "{input:?} to {c_out} padded {padding:?}: {worst:e}");
        }
    }

    /// The transposed transform is the transform of the weight flipped and transposed.
    #[test]
    fn the_transposed_transform_flips_and_transposes() {
        let (c_out, c_in) = (3, 2);
        let weight = values(c_out * c_in * 9, 3);
        let mut flipped = vec![0.0; weight.len()];
        for (o, i, k) in (0..c_out).flat_map(|o| (0..c_in).flat_map(move |i| (0..9).map(move |k| (o, i, k)))) {
            flipped[(i * c_out + o) * 9 + 8 - k] = weight[(o * c_in + i) * 9 + k];
        }
        assert_eq!(
            transformed_weight(&weight, [c_in, c_out], true),
            transformed_weight(&flipped, [c_in, c_out], false)
        );
    }
}
