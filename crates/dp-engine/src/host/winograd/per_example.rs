//! One example's weight gradient of a 3x3 stride-1 convolution by F(2x2, 3x3), for the DP step's
//! materialised per-example gradients: the example's 16 transformed products
//! M_xi^T = (B^T d B)_xi (A dY A^T)_xi^T [C_in, C_out] over its own tiles, then G^T M G per channel
//! pair into the kept [C_in 9, C_out] layout (the summed gradient's own `back_transform`). 16
//! multiply-adds per tile and channel pair against the unfolded GEMM's 36 per output pixel's
//! four; it pays where an example has tiles enough for the GEMMs' inner dimension
//! ([`pays`]).

use super::{Geometry, Scratch, TILE, applies, back_transform, transformed_product};
use dp_kernels::Patches;

/// Whether one example's gradient of a convolution of `patches` from x [B, C_in, H, W] to
/// `c_out` channels goes by F(2x2, 3x3) rather than its unfolded patches: [`applies`], and at
/// least [`MIN_TILES`] GEMM columns per example (below, the GEMMs' packing outweighs their
/// products). Measured on the AMD EPYC VM (docs/BENCHMARKS.md, issue 53).
pub(crate) fn pays(patches: &Patches, input: [usize; 4], c_out: usize) -> bool {
    let [_, _, h, w] = input;
    applies(patches, input, c_out)
        && Geometry::new([1, input[1], h, w], c_out, patches.padding).per_example() >= MIN_TILES
}

/// The fewest GEMM columns (tiles and one spare per tile row) of one example for [`pays`].
const MIN_TILES: usize = 64;

/// One thread's buffers for [`ExampleProducts::product`]: the example's transforms, its 16
/// products [16, C_in, C_out] and G^T applied along one axis [4, 3, C_out].
pub(crate) struct ExampleProducts {
    geometry: Geometry,
    scratch: Scratch,
    products: Vec<f32>,
    rows: Vec<f32>,
}

impl ExampleProducts {
    /// Buffers for examples [C_in, H, W] (`input`) of a convolution to `c_out` channels padded
    /// by `padding`.
    pub(crate) fn new([c_in, h, w]: [usize; 3], c_out: usize, padding: [usize; 2]) -> Self {
        let geometry = Geometry::new([1, c_in, h, w], c_out, padding);
        Self {
            scratch: Scratch::new(&geometry, 1),
            products: vec![0.0; TILE * c_in * c_out],
            rows: vec![0.0; 12 * c_out],
            geometry,
        }
    }

    /// The weight gradient of one example x [C_in, H, W] given its output gradient `grad`
    /// [C_out, H', W'], as its transpose [C_in 9, C_out] (row i 9 + 3 r + s the tap (r, s) of
    /// input channel i, the unfolded patches' order) into `out`.
    pub(crate) fn product(&mut self, x: &[f32], grad: &[f32], out: &mut [f32]) {
        let g = &self.geometry;
        let ([_, c_in, h, w], c_out, [ho, wo]) = (g.input, g.c_out, g.output);
        assert!(
            x.len() == c_in * h * w && grad.len() == c_out * ho * wo && out.len() == 9 * c_in * c_out,
            "Winograd operand sizes"
        );
        transformed_product(x, grad, None, g, &mut self.scratch, &mut self.products, false);
        back_transform(&self.products, [c_in, c_out], &mut self.rows, out);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{SHAPES, naive_weight_grad, values, worst_transposed};
    use super::*;

    /// Each example's gradient, transposed to [C_in 9, C_out], against the definition's for that
    /// example alone.
    #[test]
    fn each_example_gradient_equals_its_definition() {
        for (input, c_out, padding) in SHAPES {
            let [b, c_in, h, w] = input;
            let [ho, wo] = [h + 2 * padding[0] - 2, w + 2 * padding[1] - 2];
            let x = values(b * c_in * h * w, 5);
            let dy = values(b * c_out * ho * wo, 2);
            let mut products = ExampleProducts::new([c_in, h, w], c_out, padding);
            let mut got = vec![f32::NAN; 9 * c_in * c_out];
            for e in 0..b {
                let [xe, dye] = [(&x, c_in * h * w), (&dy, c_out * ho * wo)].map(|(t, n)| &t[e * n..][..n]);
                let want = naive_weight_grad(xe, [1, c_in, h, w], dye, c_out, padding, &[1.0]);
                products.product(xe, dye, &mut got);
                let worst = worst_transposed(&got, &want, [c_in, c_out]);
                assert!(worst < 1e-5, "{input:?} to {c_out} padded {padding:?}, example {e}: {worst:e}");
            }
        }
    }

    /// Examples with fewer than 64 GEMM columns keep the unfolded product.
    #[test]
    fn few_tiles_keep_the_unfolded_product() {
        let patches = |padding| Patches { kernel: [3, 3], stride: [1, 1], padding, dilation: [1, 1] };
        assert!(pays(&patches([1, 1]), [8, 64, 32, 32], 64));
        assert!(pays(&patches([1, 1]), [8, 128, 16, 16], 128));
        assert!(!pays(&patches([1, 1]), [8, 256, 8, 8], 256));
        assert!(!pays(&patches([1, 1]), [8, 8, 32, 32], 64));
    }
}
