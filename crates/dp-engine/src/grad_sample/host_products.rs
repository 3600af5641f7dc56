//! The per-example products G_b A_b^T of an affine layer (`affine`) on flex, the CPU backend,
//! read in place from host memory, one example per task, one GEMM each: a materialised layer's
//! per-example gradients and their squared norms (through a weight-standardised layer's
//! Jacobian, row by row, while the example is in cache), a ghost layer's two [P, P] Gram matrices
//! (a stride-1 convolution's patch Gram from its pixels where cheaper, `host::patch_gram`)
//! reduced to its squared norms in one thread's buffer (with a standardised layer's correction
//! terms), and the factor-weighted sums accumulated over fixed parts of the examples (the same
//! bits on every run). Burn's batched matmul copies a transposed operand and writes every
//! example's result to memory before it is reduced. Each product is taken as (A_b G_b^T)^T, the
//! orientation in which the `gemm` crate is fastest on these shapes (the MNIST CNN's first layer:
//! 1.25 ms against 2.2 for G_b A_b^T). Other backends keep `affine`'s tensor operations (None
//! here). The plain step's convolution weight gradient (`conv`) is the same sum, unclipped
//! ([`summed_products`]); a sum over a 3x3 stride-1 convolution that `host::winograd` covers is
//! taken in its transformed domain, and so is one example's product where the example has tiles
//! enough (`winograd::per_example`: WRN-16-4's 64-channel 32x32 layers 35 ms per lot against
//! 52 unfolded).

use super::layer_input::LayerInput;
use super::norm_method::{CANCELLATION_MARGIN, NormMethod};
use super::standardization::Standardization;
use crate::host::buffers::Reused;
use crate::host::flex::on_flex;
use crate::host::gemm::{Strided, gemm_into, sum_over_examples};
use crate::host::kernel_log::{Kernel, Layer, Pass, note};
use crate::host::patch_gram;
use crate::host::winograd;
use crate::host::winograd::per_example::{self, ExampleProducts};
use burn::backend::flex::FlexTensor;
use burn::tensor::{Device, Tensor};
use dp_kernels::Patches;
use dp_kernels::im2col::unfold_example;
use dp_kernels::tensor_io::{matrix, vector};
use dp_kernels::vectorised::{sum_of_products, vectorised};
use rayon::prelude::*;

/// A layer's input on the host: A [B, K, P] itself, or x [B, C, H, W] with the geometry whose
/// patches are A (`LayerInput::Patches`).
enum HostInput<'a> {
    /// A's values.
    Dense(&'a [f32]),
    /// x's values, [C, H, W] and the patches' geometry.
    Patches(&'a [f32], [usize; 3], Patches),
}

/// The operands of one layer on the host: A [B, K, P] and G [B, N, P] as slices.
pub(crate) struct Operands<'a> {
    a: HostInput<'a>,
    g: &'a [f32],
    /// [B, N, K, P].
    dims: [usize; 4],
    /// Whether an example's A_b^T A_b is taken from its pixels (`host::patch_gram`).
    pixel_gram: bool,
    /// Whether an example's A_b G_b^T is taken by Winograd's transform (`winograd::per_example`).
    winograd_products: bool,
}

/// One thread's scratch for [`Operands::product`].
struct ProductScratch {
    /// One example's A_b unfolded (empty where the layer is dense or takes Winograd's path).
    patches: Vec<f32>,
    /// One example's transforms and products, where Winograd's path pays.
    winograd: Option<ExampleProducts>,
}

impl<'a> Operands<'a> {
    /// A convolution's operands: A the patches for `patches` of x (the values of [B, C, H, W]
    /// `shape`), G [B, N, P] its output gradient's values.
    pub(crate) fn of_convolution(x: &'a [f32], shape: [usize; 4], patches: Patches, g: &'a [f32], n: usize) -> Self {
        let [b, c, h, w] = shape;
        let [ho, wo] = patches.output_size([h, w]);
        let k = c * patches.kernel[0] * patches.kernel[1];
        let pixel_gram = patch_gram::cheaper_cost(&patches, [c, h, w]).is_some();
        let winograd_products = per_example::pays(&patches, shape, n);
        Self {
            a: HostInput::Patches(x, [c, h, w], patches),
            g,
            dims: [b, n, k, ho * wo],
            pixel_gram,
            winograd_products,
        }
    }

    /// The layer, as the kernel log names it.
    fn layer(&self) -> Layer {
        let [b, n, k, p] = self.dims;
        match self.a {
            HostInput::Dense(_) => Layer::Affine { input: [b, k, p], outputs: n },
            HostInput::Patches(_, [c, h, w], patches) => Layer::conv([b, c, h, w], n, patches),
        }
    }

    /// Scratch for one example's A_b where the patches are unfolded (empty where A is given).
    fn scratch(&self) -> Vec<f32> {
        let [_, _, k, p] = self.dims;
        match self.a {
            HostInput::Dense(_) => Vec::new(),
            HostInput::Patches(..) => vec![0.0; k * p],
        }
    }

    /// Scratch for [`Self::product`].
    fn product_scratch(&self) -> ProductScratch {
        match self.a {
            HostInput::Patches(_, input, patches) if self.winograd_products => ProductScratch {
                patches: Vec::new(),
                winograd: Some(ExampleProducts::new(input, self.dims[1], patches.padding)),
            },
            _ => ProductScratch { patches: self.scratch(), winograd: None },
        }
    }

    /// Example `e`'s A_b G_b^T [K, N] into `out`, with scratch from [`Self::product_scratch`]:
    /// by Winograd's transform where that pays, else one GEMM of its patches.
    fn product(&self, e: usize, scratch: &mut ProductScratch, out: &mut [f32]) {
        let [_, n, k, p] = self.dims;
        match (&mut scratch.winograd, &self.a) {
            (Some(products), HostInput::Patches(x, [c, h, w], _)) => {
                products.product(&x[e * c * h * w..][..c * h * w], &self.g[e * n * p..][..n * p], out);
            }
            _ => {
                let (a, g_t) = self.example(e, &mut scratch.patches);
                gemm_into(out, [k, p, n], a, g_t, 1.0, false);
            }
        }
    }

    /// The kernel of this layer's materialised per-example gradients.
    fn product_kernel(&self) -> Kernel {
        match self.winograd_products {
            true => Kernel::PerExampleWinograd,
            false => Kernel::PerExampleGemm,
        }
    }

    /// Scratch for one example's A_b^T A_b ([`Self::gram`]): its pixels' Gram, or its A_b.
    fn gram_scratch(&self) -> Vec<f32> {
        match self.a {
            HostInput::Patches(_, [_, h, w], _) if self.pixel_gram => vec![0.0; patch_gram::scratch_len([h, w])],
            _ => self.scratch(),
        }
    }

    /// Example `e`'s A_b^T A_b [P, P] into `gram`, and A_b's column sums [P] into `sums` where
    /// asked, with `scratch` from [`Self::gram_scratch`]: from the example's pixels where that is
    /// cheaper, else from its patches unfolded.
    fn gram(&self, e: usize, scratch: &mut [f32], gram: &mut [f32], sums: Option<&mut [f32]>) {
        let [_, _, k, p] = self.dims;
        if let HostInput::Patches(x, [c, h, w], patches) = &self.a
            && self.pixel_gram
        {
            let x = &x[e * c * h * w..][..c * h * w];
            patch_gram::gram(x, [*c, *h, *w], patches, scratch, gram);
            if let Some(sums) = sums {
                patch_gram::column_sums(x, [*c, *h, *w], patches, scratch, sums);
            }
            return;
        }
        let (a, _) = self.example(e, scratch);
        gemm_into(gram, [p, k, p], a.transpose(), a, 1.0, false);
        if let Some(sums) = sums {
            sums.fill(0.0);
            for row in a.values[..k * p].chunks_exact(p) {
                sums.iter_mut().zip(row).for_each(|(c, &v)| *c += v);
            }
        }
    }

    /// The kernel of this layer's ghost norms.
    fn ghost_kernel(&self) -> Kernel {
        match self.pixel_gram {
            true => Kernel::GhostPixelGram,
            false => Kernel::GhostGemm,
        }
    }

    /// Example `e`'s A_b [K, P] (its patches unfolded into `scratch`, from [`Self::scratch`]) and
    /// G_b^T [P, N] (G_b read transposed).
    fn example<'s>(&'s self, e: usize, scratch: &'s mut [f32]) -> (Strided<'s>, Strided<'s>) {
        let [_, n, k, p] = self.dims;
        let a: &[f32] = match &self.a {
            HostInput::Dense(a) => &a[e * k * p..][..k * p],
            HostInput::Patches(x, [c, h, w], patches) => {
                unfold_example(&x[e * c * h * w..][..c * h * w], [*c, *h, *w], patches, scratch);
                scratch
            }
        };
        (Strided::row_major(a, p), Strided::transposed(&self.g[e * n * p..][..n * p], p))
    }
}

/// Runs `f` on the host operands of A [B, K, P] and G [B, N, P]; None off flex or when the
/// shapes disagree.
fn with_operands<T>(input: &LayerInput, grad: &Tensor<3>, f: impl FnOnce(&Operands) -> T) -> Option<T> {
    let ([b, k, p], [gb, n, gp]) = (input.dims(), grad.dims());
    if gb != b || gp != p {
        return None;
    }
    let g = on_flex(grad)?;
    let held = match input {
        LayerInput::Dense(a) => on_flex(a)?,
        LayerInput::Patches(conv) => on_flex(&conv.x)?,
    };
    let g = g.storage::<f32>();
    let ops = match input {
        LayerInput::Dense(_) => Operands {
            a: HostInput::Dense(held.storage::<f32>()),
            g,
            dims: [b, n, k, p],
            pixel_gram: false,
            winograd_products: false,
        },
        LayerInput::Patches(conv) => Operands::of_convolution(held.storage::<f32>(), conv.x.dims(), conv.patches, g, n),
    };
    Some(f(&ops))
}

/// A weight-standardised layer's standardisation on the host: the flex primitives kept alive, W^
/// transposed to [K, N] (so that a row of a materialised A_b G_b^T [K, N] meets its W^ column
/// contiguously) and c_n = ||w^_n||^2 / K.
struct HostStandardization {
    w_hat_t: Vec<f32>,
    inv_std: FlexTensor,
    projection: FlexTensor,
    c: Vec<f64>,
}

impl HostStandardization {
    /// The host values of `st` for a layer of N outputs and K inputs; None off flex or when the
    /// shapes disagree.
    fn of(st: &Standardization, [b, n, k, p]: [usize; 4]) -> Option<Self> {
        if st.w_hat.dims() != [n, k] || st.inv_std.dims() != [n, 1] || st.projection.dims() != [b, n, p] {
            return None;
        }
        let w_hat = on_flex(&st.w_hat)?;
        let w = w_hat.storage::<f32>();
        let w_hat_t = (0..k * n).map(|i| w[(i % n) * k + i / n]).collect();
        let c = w.chunks(k.max(1)).map(|row| sum_of_products(row, row) / k as f64);
        Some(Self { w_hat_t, inv_std: on_flex(&st.inv_std)?, projection: on_flex(&st.projection)?, c: c.collect() })
    }

    /// ||J^T x||^2 summed over the N rows of one example's gradient x, given as its transpose
    /// xt [K, N]: per row, y = (x - mean(x) - w^ mean(x ∘ w^)) / s, computed (no cancellation),
    /// in f32 lanes across the rows, vectorised, with the squares added into f64 every
    /// [`ROWS_PER_FLUSH`] of the K inputs (the means are least-squares coefficients: their
    /// rounding changes the norm at second order only); `sums` is scratch of 3N.
    fn jacobian_sq_norm(&self, xt: &[f32], [n, k]: [usize; 2], sums: &mut [f32]) -> f32 {
        let inv_std = self.inv_std.storage::<f32>();
        let (mean, rest) = sums.split_at_mut(n);
        let (along, squares) = rest.split_at_mut(n);
        let rows = || xt.chunks_exact(n).zip(self.w_hat_t.chunks_exact(n));
        vectorised(|| {
            mean.fill(0.0);
            along.fill(0.0);
            for (row, w) in rows() {
                for j in 0..n {
                    mean[j] += row[j];
                    along[j] += row[j] * w[j];
                }
            }
            let per_input = 1.0 / k as f32;
            mean.iter_mut().chain(along.iter_mut()).for_each(|v| *v *= per_input);
        });
        let mut total = 0.0f64;
        let flushes = xt.chunks(ROWS_PER_FLUSH * n).zip(self.w_hat_t.chunks(ROWS_PER_FLUSH * n));
        for (block, w_block) in flushes {
            vectorised(|| {
                squares.fill(0.0);
                for (row, w) in block.chunks_exact(n).zip(w_block.chunks_exact(n)) {
                    for j in 0..n {
                        let y = row[j] - mean[j] - w[j] * along[j];
                        squares[j] += y * y;
                    }
                }
            });
            total +=
                squares.iter().zip(inv_std).map(|(&q, &s)| f64::from(q) * f64::from(s) * f64::from(s)).sum::<f64>();
        }
        total as f32
    }
}

/// Inputs (rows of a transposed gradient) whose squares [`HostStandardization::jacobian_sq_norm`]
/// sums in f32 before adding them into f64.
const ROWS_PER_FLUSH: usize = 64;

/// The per-example weight gradients of a materialised layer, kept on the host as their
/// transposes: example b's A_b G_b^T [K, N] at `values[b * K * N..]`.
pub(crate) struct HostGradients {
    values: Reused,
    /// [B, K, N].
    dims: [usize; 3],
}

/// One standardised ghost norm (`affine::standardized_ghost`) of example `e`, with `buf` scratch
/// of 2P^2 + NP + P and `scratch` from [`Operands::gram_scratch`].
fn standardized_ghost(ops: &Operands, st: &HostStandardization, e: usize, buf: &mut [f32], scratch: &mut [f32]) -> f32 {
    let [_, n, k, p] = ops.dims;
    let inv_std = st.inv_std.storage::<f32>();
    let (gram_a, rest) = buf.split_at_mut(p * p);
    let (gram_g, rest) = rest.split_at_mut(p * p);
    let (scaled, column_sums) = rest.split_at_mut(n * p);
    // G_b / s row by row, [N, P].
    let g = &ops.g[e * n * p..][..n * p];
    for ((out, row), &s) in scaled.chunks_exact_mut(p).zip(g.chunks_exact(p)).zip(inv_std) {
        out.iter_mut().zip(row).for_each(|(o, &v)| *o = v * s);
    }
    ops.gram(e, scratch, gram_a, Some(column_sums));
    let scaled_t = Strided::transposed(scaled, p);
    gemm_into(gram_g, [p, n, p], scaled_t, scaled_t.transpose(), 1.0, false);
    let full = sum_of_products(gram_a, gram_g);
    let projection = &st.projection.storage::<f32>()[e * n * p..][..n * p];
    let removed: f64 = scaled
        .chunks_exact(p)
        .zip(projection.chunks_exact(p))
        .zip(&st.c)
        .map(|((row, proj), &c)| {
            let (ones, along) = (sum_of_products(row, column_sums), sum_of_products(row, proj));
            ones * ones + along * along * (2.0 - c)
        })
        .sum::<f64>()
        / k as f64;
    ((full - removed).max(0.0) + full * f64::from(CANCELLATION_MARGIN)) as f32
}

/// ||J^T G_b A_b^T||^2 for every example [B] (J the identity when `standardization` is None) by
/// `method` (ghost: from the Gram matrices; otherwise from the gradient itself, which is
/// returned too, for the weighted sum), on flex, with the kernel that took them.
pub(crate) fn sq_norms(
    input: &LayerInput,
    grad: &Tensor<3>,
    method: NormMethod,
    standardization: Option<&Standardization>,
) -> Option<(Tensor<1>, Option<HostGradients>, Kernel)> {
    let device = grad.device();
    with_operands(input, grad, |ops| {
        let [b, n, k, p] = ops.dims;
        let st = match standardization {
            Some(st) => Some(HostStandardization::of(st, ops.dims)?),
            None => None,
        };
        if method == NormMethod::Ghost {
            let norms = (0..b)
                .into_par_iter()
                .map_init(
                    || (vec![0.0f32; 2 * p * p + n * p + p], ops.gram_scratch()),
                    |(buf, scratch), e| match &st {
                        Some(st) => standardized_ghost(ops, st, e, buf, scratch),
                        None => {
                            let (gram_a, rest) = buf.split_at_mut(p * p);
                            let gram_g = &mut rest[..p * p];
                            ops.gram(e, scratch, gram_a, None);
                            let g_t = Strided::transposed(&ops.g[e * n * p..][..n * p], p);
                            gemm_into(gram_g, [p, n, p], g_t, g_t.transpose(), 1.0, false);
                            sum_of_products(gram_a, gram_g) as f32
                        }
                    },
                )
                .collect();
            return Some((vector(norms, &device), None, ops.ghost_kernel()));
        }
        // Each example's A_b G_b^T [K, N], its norm taken while it is in cache.
        // Every value is written by its example's GEMM: the buffer of an earlier step serves.
        let mut values = Reused::take(b * k * n);
        let norms = match k * n {
            0 => vec![0.0; b],
            size => values
                .values_mut()
                .par_chunks_mut(size)
                .enumerate()
                .map_init(
                    || (vec![0.0f32; 3 * n], ops.product_scratch()),
                    |(sums, scratch), (e, out)| {
                        ops.product(e, scratch, out);
                        match &st {
                            Some(st) => st.jacobian_sq_norm(out, [n, k], sums),
                            None => sum_of_products(out, out) as f32,
                        }
                    },
                )
                .collect(),
        };
        Some((vector(norms, &device), Some(HostGradients { values, dims: [b, k, n] }), ops.product_kernel()))
    })?
}

/// The factors s [B] on the host (one each when None); None off flex or for another length.
fn host_factors(factors: Option<&Tensor<1>>, b: usize) -> Option<Option<FlexTensor>> {
    match factors {
        Some(s) if s.dims() != [b] => None,
        Some(s) => Some(Some(on_flex(s)?)),
        None => Some(None),
    }
}

/// Σ_b s_b A_b G_b^T [K, N] (the transposed products) with the `scales` s [B] (one each when
/// None), accumulated over fixed parts of the examples: the same bits on every run. The kernel
/// is noted as `pass`'s.
pub(crate) fn summed_products(ops: &Operands, scales: Option<&[f32]>, pass: Pass) -> Vec<f32> {
    let [b, n, k, p] = ops.dims;
    if let HostInput::Patches(x, [c, h, w], patches) = ops.a
        && winograd::applies(&patches, [b, c, h, w], n)
    {
        note(&ops.layer(), pass, Kernel::WinogradF2x2_3x3);
        return winograd::weight_grad(x, [b, c, h, w], ops.g, n, patches.padding, scales);
    }
    let kernel = match ops.a {
        HostInput::Dense(_) => Kernel::Gemm,
        HostInput::Patches(..) => Kernel::Im2colGemm,
    };
    note(&ops.layer(), pass, kernel);
    sum_over_examples(b, 1, k * n, |acc, examples| {
        let mut patches = ops.scratch();
        for e in examples {
            let (a, g_t) = ops.example(e, &mut patches);
            gemm_into(acc, [k, p, n], a, g_t, scales.map_or(1.0, |s| s[e]), true);
        }
    })
}

/// Σ_b s_b G_b A_b^T [N, K] with the `factors` s [B] (one each when None), on flex.
pub(crate) fn weighted_sum(input: &LayerInput, grad: &Tensor<3>, factors: Option<&Tensor<1>>) -> Option<Tensor<2>> {
    let scales = host_factors(factors, input.dims()[0])?;
    let scales = scales.as_ref().map(|s| s.storage::<f32>());
    let (sum, [k, n]) =
        with_operands(input, grad, |ops| (summed_products(ops, scales, Pass::ClippedSum), [ops.dims[2], ops.dims[1]]))?;
    Some(matrix(sum, [k, n], &grad.device()).transpose())
}

impl HostGradients {
    /// Σ_b s_b (G_b A_b^T) [N, K] of the kept gradients with the `factors` s [B] (one each
    /// when None), on `device`; None when the factors are not on flex.
    pub(crate) fn weighted_sum(&self, factors: Option<&Tensor<1>>, device: &Device) -> Option<Tensor<2>> {
        let [b, k, n] = self.dims;
        let scales = host_factors(factors, b)?;
        let scales = scales.as_ref().map(|s| s.storage::<f32>());
        let sum = sum_over_examples(b, 1, k * n, |acc, examples| {
            for e in examples {
                let s = scales.map_or(1.0, |s| s[e]);
                let values = &self.values.values()[e * k * n..][..k * n];
                vectorised(|| acc.iter_mut().zip(values).for_each(|(t, &v)| *t += s * v));
            }
        });
        Some(matrix(sum, [k, n], device).transpose())
    }
}
