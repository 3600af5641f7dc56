//! The sums per row and channel of x [R, C, P] and its gradient g over the positions: the
//! gradients of a per-channel scale and shift (`ops::scale_shift`, summed over the rows) and,
//! with a row per example, their per-example gradients (`grad_sample::scale_shift`).

use dp_kernels::vectorised::sum_of_products;
use rayon::prelude::*;

/// Per row r and channel c of x and g [R, C, P] (contiguous, the same shape): sum_p g x and
/// sum_p g, [R * C] each, in parallel over the rows. Summed over r they are the gradients of gamma
/// and beta; per example (r = b), their per-example gradients.
pub(crate) fn channel_sums(x: &[f32], g: &[f32], shape: [usize; 3]) -> (Vec<f32>, Vec<f32>) {
    let [_, c, p] = shape;
    let runs = x.len().checked_div(p).unwrap_or(0);
    let (mut along, mut total) = (vec![0.0f32; runs], vec![0.0f32; runs]);
    if runs == 0 || c == 0 {
        return (along, total);
    }
    along
        .par_chunks_mut(c)
        .zip(total.par_chunks_mut(c))
        .zip(x.par_chunks(c * p).zip(g.par_chunks(c * p)))
        .for_each_init(
            || vec![1.0f32; p],
            |ones, ((along, total), (x, g))| {
                for (((a, t), x), g) in along.iter_mut().zip(total.iter_mut()).zip(x.chunks(p)).zip(g.chunks(p)) {
                    *a = sum_of_products(g, x) as f32;
                    *t = sum_of_products(g, ones) as f32;
                }
            },
        );
    (along, total)
}
