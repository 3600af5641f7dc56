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
}

/// The patches of `x` (example-major [B, C, H, W] values of `shape`), [B, C*kh*kw, H'*W'].
pub fn im2col(x: &[f32], shape: [usize; 4], p: &Patches) -> Vec<f32> {
    let [b, c, h, w] = shape;
    let [ho, wo] = p.output_size([h, w]);
    let per_example = c * p.kernel[0] * p.kernel[1] * ho * wo;
    let mut out = vec![0.0f32; b * per_example];
    if out.is_empty() {
        return out;
    }
    out.par_chunks_mut(per_example).zip(x.par_chunks(c * h * w)).for_each(|(patches, x)| {
        unfold_example(x, [c, h, w], p, patches);
    });
    out
}

/// Writes every element of one example's patches (x [C, H, W] values of `shape`) into `out`
/// [C*kh*kw, H'*W'], zeros where a patch reaches into the padding. The padded example is first
/// split by stride phase (`Phases`), so that every output line is one contiguous copy, with no
/// test per element or per line.
pub fn unfold_example(x: &[f32], shape: [usize; 3], p: &Patches, out: &mut [f32]) {
    let [c, h, w] = shape;
    let [ho, wo] = p.output_size([h, w]);
    let [kh, kw] = p.kernel;
    assert!(x.len() == c * h * w && out.len() == c * kh * kw * ho * wo, "im2col operand sizes");
    if out.is_empty() {
        return;
    }
    let phases = Phases::of(x, shape, [ho, wo], p);
    let [sy, sx] = p.stride;
    for (row, target) in out.chunks_mut(ho * wo).enumerate() {
        let (channel, ki, kj) = (row / (kh * kw), row / kw % kh, row % kw);
        let (ry, rx) = (ki * p.dilation[0], kj * p.dilation[1]);
        let plane = phases.plane(channel, ry % sy, rx % sx);
        for (oy, line) in target.chunks_mut(wo).enumerate() {
            let start = (oy + ry / sy) * phases.cols + rx / sx;
            line.copy_from_slice(&plane[start..start + wo]);
        }
    }
}

/// Adds one example's patch gradients `cols` [C*kh*kw, H'*W'] onto its input gradient `out`
/// [C, H, W] ("col2im", the adjoint of [`unfold_example`]): each patch element goes to the input
/// element it was read from, those read from the padding are dropped. The input columns one
/// kernel column reaches are found once per row, so the inner loop is a strided add with no test.
pub fn fold_example(cols: &[f32], shape: [usize; 3], p: &Patches, out: &mut [f32]) {
    let [c, h, w] = shape;
    let [ho, wo] = p.output_size([h, w]);
    let [kh, kw] = p.kernel;
    assert!(out.len() == c * h * w && cols.len() == c * kh * kw * ho * wo, "col2im operand sizes");
    if cols.is_empty() {
        return;
    }
    let [sy, sx] = p.stride;
    for (row, source) in cols.chunks_exact(ho * wo).enumerate() {
        let (channel, ki, kj) = (row / (kh * kw), row / kw % kh, row % kw);
        // Output column ox reads input column ox sx + reach - px: those inside [0, w).
        let reach = kj * p.dilation[1];
        let first = p.padding[1].saturating_sub(reach).div_ceil(sx);
        let last = (w + p.padding[1]).saturating_sub(reach).div_ceil(sx).min(wo);
        if first >= last {
            continue;
        }
        let plane = &mut out[channel * h * w..][..h * w];
        for (oy, line) in source.chunks_exact(wo).enumerate() {
            let Some(iy) = (oy * sy + ki * p.dilation[0]).checked_sub(p.padding[0]).filter(|&iy| iy < h) else {
                continue;
            };
            let start = iy * w + first * sx + reach - p.padding[1];
            let values = &line[first..last];
            match sx {
                // Unit stride: one contiguous add, which the compiler vectorises.
                1 => plane[start..][..values.len()].iter_mut().zip(values).for_each(|(t, &v)| *t += v),
                _ => plane[start..].iter_mut().step_by(sx).zip(values).for_each(|(t, &v)| *t += v),
            }
        }
    }
}

/// One example zero-padded and split by stride phase: the phase (a, b) plane holds the padded
/// image's rows a, a + sy, ... and columns b, b + sx, ..., so the input a kernel tap reads for
/// one row of output positions is a contiguous run of one plane.
struct Phases {
    /// [C, sy, sx, rows, cols].
    values: Vec<f32>,
    /// Phases per axis (the stride).
    stride: [usize; 2],
    /// Rows and columns of a phase plane.
    rows: usize,
    cols: usize,
}

impl Phases {
    /// The phases of `x` [C, H, W] padded as `p` says, and beyond that with zeros as far as a
    /// kernel reads for the [`Patches::output_size`] `[ho, wo]` (a kernel that spans more than the
    /// padded image still has one output position).
    fn of(x: &[f32], [c, h, w]: [usize; 3], [ho, wo]: [usize; 2], p: &Patches) -> Self {
        let [sy, sx] = p.stride;
        let [py, px] = p.padding;
        let reach = |axis: usize, out: usize| (out - 1) * p.stride[axis] + (p.kernel[axis] - 1) * p.dilation[axis];
        let rows = (h + 2 * py).div_ceil(sy).max(reach(0, ho) / sy + 1);
        let cols = (w + 2 * px).div_ceil(sx).max(reach(1, wo) / sx + 1);
        let mut values = vec![0.0f32; c * sy * sx * rows * cols];
        for (channel, plane) in x.chunks_exact(h * w).enumerate() {
            for (iy, line) in plane.chunks_exact(w).enumerate() {
                let y = iy + py;
                let base = ((channel * sy + y % sy) * sx * rows + y / sy) * cols;
                // Column phase b holds padded columns b, b + sx, ...: the input's from ix0 on.
                for b in 0..sx {
                    let ix0 = (b + sx - px % sx) % sx;
                    let target = &mut values[base + b * rows * cols + (ix0 + px) / sx..];
                    for (t, &v) in target.iter_mut().zip(line.iter().skip(ix0).step_by(sx)) {
                        *t = v;
                    }
                }
            }
        }
        Self { values, stride: p.stride, rows, cols }
    }

    /// The plane of `channel` at phase (`a`, `b`), [rows, cols].
    fn plane(&self, channel: usize, a: usize, b: usize) -> &[f32] {
        let size = self.rows * self.cols;
        &self.values[((channel * self.stride[0] + a) * self.stride[1] + b) * size..][..size]
    }
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

    /// The patches by their definition, one element at a time, in their order.
    fn naive(x: &[f32], [b, c, h, w]: [usize; 4], p: &Patches) -> Vec<f32> {
        let [ho, wo] = p.output_size([h, w]);
        let [kh, kw] = p.kernel;
        let mut out = Vec::new();
        for (e, ch) in (0..b).flat_map(|e| (0..c).map(move |ch| (e, ch))) {
            for (ki, kj) in (0..kh).flat_map(|ki| (0..kw).map(move |kj| (ki, kj))) {
                for (oy, ox) in (0..ho).flat_map(|oy| (0..wo).map(move |ox| (oy, ox))) {
                    let iy = (oy * p.stride[0] + ki * p.dilation[0]) as isize - p.padding[0] as isize;
                    let ix = (ox * p.stride[1] + kj * p.dilation[1]) as isize - p.padding[1] as isize;
                    let inside = (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix);
                    out.push(if inside { x[((e * c + ch) * h + iy as usize) * w + ix as usize] } else { 0.0 });
                }
            }
        }
        out
    }

    #[test]
    fn the_patches_equal_their_definition_over_a_grid_of_geometries() {
        let shape = [2, 2, 5, 6];
        let x: Vec<f32> = (0..shape.iter().product::<usize>()).map(|v| v as f32 + 1.0).collect();
        let mut checked = 0;
        for kernel in [[1, 1], [2, 3], [3, 3], [5, 4]] {
            for stride in [[1, 1], [2, 1], [1, 3], [2, 2]] {
                for padding in [[0, 0], [1, 2], [3, 0]] {
                    for dilation in [[1, 1], [2, 1]] {
                        let p = Patches { kernel, stride, padding, dilation };
                        assert_eq!(im2col(&x, shape, &p), naive(&x, shape, &p), "{p:?}");
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 96);
    }

    #[test]
    fn folding_is_the_adjoint_of_unfolding_over_a_grid_of_geometries() {
        // <unfold(x), y> = <x, fold(y)> for every x and y: fold(y) is y summed back, element by
        // element, onto what the naive unfold read (padding dropped).
        let [c, h, w] = [2, 5, 6];
        let x: Vec<f32> = (0..c * h * w).map(|v| ((v * 7 % 11) as f32 - 5.0) / 3.0).collect();
        let mut checked = 0;
        for kernel in [[1, 1], [2, 3], [3, 3], [5, 4], [7, 8]] {
            for stride in [[1, 1], [2, 1], [1, 3], [2, 2]] {
                for padding in [[0, 0], [1, 2], [3, 0]] {
                    for dilation in [[1, 1], [2, 1]] {
                        let p = Patches { kernel, stride, padding, dilation };
                        let cols = naive(&x, [1, c, h, w], &p);
                        let y: Vec<f32> = (0..cols.len()).map(|v| ((v * 5 % 13) as f32 - 6.0) / 4.0).collect();
                        let mut folded = vec![0.5f32; c * h * w];
                        fold_example(&y, [c, h, w], &p, &mut folded);
                        let dot = |a: &[f32], b: &[f32]| {
                            a.iter().zip(b).map(|(&u, &v)| f64::from(u) * f64::from(v)).sum::<f64>()
                        };
                        let offset = 0.5 * x.iter().map(|&v| f64::from(v)).sum::<f64>();
                        let (lhs, rhs) = (dot(&cols, &y), dot(&x, &folded) - offset);
                        assert!((lhs - rhs).abs() <= 1e-9 * (1.0 + lhs.abs()), "{p:?}: {lhs} vs {rhs}");
                        // Each input element gets the sum of exactly the entries that read it.
                        for i in 0..c * h * w {
                            let mut unit = vec![0.0f32; c * h * w];
                            unit[i] = 1.0;
                            let read = naive(&unit, [1, c, h, w], &p);
                            let want: f64 = read.iter().zip(&y).map(|(&r, &v)| f64::from(r) * f64::from(v)).sum();
                            assert!((f64::from(folded[i]) - 0.5 - want).abs() < 1e-4, "{p:?} element {i}");
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 120);
    }
}
