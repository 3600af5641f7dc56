//! im2col: the patches of a 2-D convolution, x [B, C, H, W] unfolded into [B, C*kh*kw, P] (rows
//! in the weight's [C, kh, kw] order, P = H' W' output positions, zeros where a patch reaches
//! into the padding). A DP convolution's per-example gradients are products of these patches with
//! its output gradients. This is the CPU version (one pass, parallel over examples); the device
//! kernel (`cube_im2col`) computes the same values, one unit per output element.

use rayon::prelude::*;

/// The geometry of a convolution's patches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patches {
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Stride (rows, columns).
    pub stride: [usize; 2],
    /// Zero padding on both sides (rows, columns).
    pub padding: [usize; 2],
    /// Spacing between kernel elements.
    pub dilation: [usize; 2],
}

impl Patches {
    /// Output height and width for an input of `size` [H, W].
    pub fn output_size(&self, size: [usize; 2]) -> [usize; 2] {
        std::array::from_fn(|i| {
            let span = self.dilation[i] * (self.kernel[i] - 1) + 1;
            (size[i] + 2 * self.padding[i]).saturating_sub(span) / self.stride[i] + 1
        })
    }

    /// The input row (or column, `axis` 1) that output position `out` reads at kernel offset
    /// `k`, or None in the padding.
    fn source(&self, axis: usize, out: usize, k: usize, size: usize) -> Option<usize> {
        (out * self.stride[axis] + k * self.dilation[axis]).checked_sub(self.padding[axis]).filter(|&i| i < size)
    }
}

/// The patches of `x` (example-major [B, C, H, W] values of `shape`), [B, C*kh*kw, H'*W'].
pub fn im2col(x: &[f32], shape: [usize; 4], p: &Patches) -> Vec<f32> {
    let [b, c, h, w] = shape;
    let [ho, wo] = p.output_size([h, w]);
    let [kh, kw] = p.kernel;
    let positions = ho * wo;
    let mut out = vec![0.0f32; b * c * kh * kw * positions];
    if out.is_empty() {
        return out;
    }
    out.par_chunks_mut(c * kh * kw * positions).enumerate().for_each(|(example, patches)| {
        for (row, target) in patches.chunks_mut(positions).enumerate() {
            let (channel, ki, kj) = (row / (kh * kw), row / kw % kh, row % kw);
            let plane = &x[(example * c + channel) * h * w..][..h * w];
            for oy in 0..ho {
                let Some(iy) = p.source(0, oy, ki, h) else { continue };
                for ox in 0..wo {
                    if let Some(ix) = p.source(1, ox, kj, w) {
                        target[oy * wo + ox] = plane[iy * w + ix];
                    }
                }
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_of_a_padded_strided_dilated_convolution() {
        // One example, one channel, 3x4 input 1..12; 2x2 kernel, stride (1, 2), padding (1, 0),
        // dilation (1, 2): output 4 x 1 positions.
        let x: Vec<f32> = (1..=12).map(|v| v as f32).collect();
        let p = Patches { kernel: [2, 2], stride: [1, 2], padding: [1, 0], dilation: [1, 2] };
        assert_eq!(p.output_size([3, 4]), [4, 1]);
        let cols = im2col(&x, [1, 1, 3, 4], &p);
        // Row (ki, kj) reads x[oy - 1 + ki][2 kj]: rows above the image are zeros.
        assert_eq!(cols, [0., 1., 5., 9., 0., 3., 7., 11., 1., 5., 9., 0., 3., 7., 11., 0.]);
    }
}
