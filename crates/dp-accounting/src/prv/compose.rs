//! Composition of discretised privacy losses: the pmf of a sum of independent losses is the
//! convolution of their pmfs, done as a product of real FFTs (powers for repeated steps).

use super::grid::{DiscreteLoss, Grid};
use realfft::RealFftPlanner;
use realfft::num_complex::Complex;

/// The pmf of the composed loss on the grid: node i carries value `grid.node(i) + offset`.
#[derive(Debug, Clone)]
pub struct Composed {
    /// Probabilities per node (round-off negatives clamped to zero, which only raises delta).
    pub pmf: Vec<f64>,
    /// Sum of every step's mean-preserving shift.
    pub offset: f64,
    /// The grid the pmf lives on.
    pub grid: Grid,
}

/// Composes `steps[k]` copies of `parts[k]` for every k. All parts share `grid`.
pub fn compose(parts: &[(&DiscreteLoss, u64)], grid: Grid) -> Composed {
    let n = grid.n;
    let mut planner = RealFftPlanner::<f64>::new();
    let forward = planner.plan_fft_forward(n);
    let inverse = planner.plan_fft_inverse(n);
    let mut product = vec![Complex::new(1.0, 0.0); n / 2 + 1];
    let mut scratch = forward.make_input_vec();
    let mut spectrum = forward.make_output_vec();
    for (part, count) in parts {
        scratch.copy_from_slice(&part.pmf);
        forward.process(&mut scratch, &mut spectrum).expect("FFT buffers sized by the planner");
        for (acc, s) in product.iter_mut().zip(&spectrum) {
            *acc *= pow(*s, *count);
        }
    }
    let mut conv = inverse.make_output_vec();
    // The imaginary parts of the DC and Nyquist bins are zero up to round-off; realfft insists.
    product[0].im = 0.0;
    product[n / 2].im = 0.0;
    inverse.process(&mut product, &mut conv).expect("FFT buffers sized by the planner");

    // A sum of T node indices s maps to value (s - T n/2) h; the output index m must carry value
    // (m - n/2) h, so m = s - (T - 1) n/2 (mod n).
    let total: u64 = parts.iter().map(|(_, c)| c).sum();
    let roll = if (total - 1).is_multiple_of(2) { 0 } else { n / 2 };
    let scale = 1.0 / n as f64;
    let pmf = (0..n).map(|m| (conv[(m + roll) % n] * scale).max(0.0)).collect();
    let offset = parts.iter().map(|(p, c)| p.shift * *c as f64).sum();
    Composed { pmf, offset, grid }
}

/// z^k by repeated squaring (k up to 2^64 steps costs at most 128 multiplications).
fn pow(mut base: Complex<f64>, mut k: u64) -> Complex<f64> {
    let mut acc = Complex::new(1.0, 0.0);
    while k > 0 {
        if k & 1 == 1 {
            acc *= base;
        }
        base *= base;
        k >>= 1;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fft_composition_matches_direct_convolution() {
        let grid = Grid { n: 16, h: 0.5 };
        let mut pmf = vec![0.0; 16];
        // Mass at values -0.5, 0, +1 (indices 7, 8, 10).
        pmf[7] = 0.2;
        pmf[8] = 0.5;
        pmf[10] = 0.3;
        let d = DiscreteLoss { pmf: pmf.clone(), shift: 0.01 };
        let c = compose(&[(&d, 3)], grid);
        // Direct: enumerate all triples of values.
        let support = [(-0.5, 0.2), (0.0, 0.5), (1.0, 0.3)];
        let mut want = [0.0; 16];
        for a in support {
            for b in support {
                for e in support {
                    let v: f64 = a.0 + b.0 + e.0;
                    let idx = (v / 0.5).round() as i64 + 8;
                    want[idx as usize] += a.1 * b.1 * e.1;
                }
            }
        }
        for (i, (got, want)) in c.pmf.iter().zip(want).enumerate() {
            assert!((got - want).abs() < 1e-12, "node {i}: {got} vs {want}");
        }
        assert!((c.offset - 0.03).abs() < 1e-15);
        // Even number of steps takes the other roll branch.
        let c2 = compose(&[(&d, 2)], grid);
        assert!((c2.pmf[8 + 4] - 0.09).abs() < 1e-12); // +1 +1
        assert!((c2.pmf[8 - 2] - 0.04).abs() < 1e-12); // -0.5 -0.5
    }

    #[test]
    fn pow_matches_repeated_multiplication() {
        let z = Complex::new(0.6, -0.7);
        let mut want = Complex::new(1.0, 0.0);
        for _ in 0..13 {
            want *= z;
        }
        assert!((pow(z, 13) - want).norm() < 1e-15);
    }
}
