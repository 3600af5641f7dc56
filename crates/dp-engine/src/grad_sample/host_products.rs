//! The per-example products G_b A_b^T of an affine layer (`affine`) on flex, the CPU backend,
//! read in place from host memory, one example per task, one GEMM each: a materialised layer's
//! per-example gradients and their squared norms, a ghost layer's two [P, P] Gram matrices
//! reduced to its squared norms in one thread's buffer, and the factor-weighted sum accumulated
//! over fixed parts of the examples (the same bits on every run). Burn's batched matmul copies a
//! transposed operand and writes every example's result to memory before it is reduced. Each
//! product is taken as (A_b G_b^T)^T, the orientation in which the `gemm` crate is fastest on
//! these shapes (the MNIST CNN's first layer: 1.25 ms against 2.2 for G_b A_b^T). Other backends
//! keep `affine`'s tensor operations (None here).

use super::affine::NormMethod;
use crate::flex_host::on_flex;
use crate::host_gemm::{Strided, gemm_into, sum_over_examples};
use burn::tensor::{Tensor, TensorData};
use dp_kernels::tensor_io::{matrix, vector};
use rayon::prelude::*;

/// The operands of one layer on the host: A [B, K, P] and G [B, N, P] as slices.
struct Operands<'a> {
    a: &'a [f32],
    g: &'a [f32],
    /// [B, N, K, P].
    dims: [usize; 4],
}

impl Operands<'_> {
    /// Example `e`'s A_b [K, P] and G_b^T [P, N] (G_b read transposed).
    fn example(&self, e: usize) -> (Strided<'_>, Strided<'_>) {
        let [_, n, k, p] = self.dims;
        (Strided::row_major(&self.a[e * k * p..][..k * p], p), Strided::transposed(&self.g[e * n * p..][..n * p], p))
    }
}

/// Runs `f` on the host operands of A [B, K, P] and G [B, N, P]; None off flex or when the
/// shapes disagree.
fn with_operands<T>(input: &Tensor<3>, grad: &Tensor<3>, f: impl FnOnce(&Operands) -> T) -> Option<T> {
    let ([b, k, p], [gb, n, gp]) = (input.dims(), grad.dims());
    if gb != b || gp != p {
        return None;
    }
    let (a, g) = (on_flex(input)?, on_flex(grad)?);
    Some(f(&Operands { a: a.storage::<f32>(), g: g.storage::<f32>(), dims: [b, n, k, p] }))
}

/// The sum of squares of `values`, accumulated in f64.
fn sum_of_squares(values: &[f32]) -> f32 {
    values.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() as f32
}

/// ||G_b A_b^T||^2 for every example [B] by `method` (ghost: from the Gram matrices; otherwise
/// from the gradient itself, which is returned too, [B, N, K], for the weighted sum), on flex.
pub(crate) fn sq_norms(
    input: &Tensor<3>,
    grad: &Tensor<3>,
    method: NormMethod,
) -> Option<(Tensor<1>, Option<Tensor<3>>)> {
    let device = input.device();
    with_operands(input, grad, |ops| {
        let [b, n, k, p] = ops.dims;
        if method == NormMethod::Ghost {
            let norms = (0..b)
                .into_par_iter()
                .map_init(
                    || vec![0.0f32; 2 * p * p],
                    |buf, e| {
                        let (a, g_t) = ops.example(e);
                        let (gram_a, gram_g) = buf.split_at_mut(p * p);
                        gemm_into(gram_a, [p, k, p], a.transpose(), a, 1.0, false);
                        gemm_into(gram_g, [p, n, p], g_t, g_t.transpose(), 1.0, false);
                        gram_a.iter().zip(gram_g.iter()).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum::<f64>() as f32
                    },
                )
                .collect();
            return (vector(norms, &device), None);
        }
        // Each example's A_b G_b^T [K, N], then the [B, N, K] gradients as a view.
        let mut transposed = vec![0.0f32; b * k * n];
        let norms = match k * n {
            0 => vec![0.0; b],
            size => transposed
                .par_chunks_mut(size)
                .enumerate()
                .map(|(e, out)| {
                    let (a, g_t) = ops.example(e);
                    gemm_into(out, [k, p, n], a, g_t, 1.0, false);
                    sum_of_squares(out)
                })
                .collect(),
        };
        let gradients = Tensor::<3>::from_data(TensorData::new(transposed, [b, k, n]), &device);
        (vector(norms, &device), Some(gradients.swap_dims(1, 2)))
    })
}

/// Σ_b s_b G_b A_b^T [N, K] with the `factors` s [B] (one each when None), on flex.
pub(crate) fn weighted_sum(input: &Tensor<3>, grad: &Tensor<3>, factors: Option<&Tensor<1>>) -> Option<Tensor<2>> {
    let device = input.device();
    let scales = match factors {
        Some(s) => Some(on_flex(s)?),
        None => None,
    };
    let scales = scales.as_ref().map(|s| s.storage::<f32>());
    let (sum, [k, n]) = with_operands(input, grad, |ops| {
        let [b, n, k, p] = ops.dims;
        if scales.is_some_and(|s| s.len() != b) {
            return None;
        }
        let sum = sum_over_examples(b, k * n, |acc, examples| {
            for e in examples {
                let (a, g_t) = ops.example(e);
                gemm_into(acc, [k, p, n], a, g_t, scales.map_or(1.0, |s| s[e]), true);
            }
        });
        Some((sum, [k, n]))
    })??;
    Some(matrix(sum, [k, n], &device).transpose())
}
