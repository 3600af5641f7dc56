//! The Morlet filter bank of the 2-D scattering transform, built in Fourier as Kymatio 0.3
//! builds it (`scattering2d/filter_bank.py`): for each scale j < J and angle theta < L a Morlet
//! wavelet (Gaussian envelope of width 0.8 * 2^j, slant 4 / L, central frequency 3 pi / 4 / 2^j,
//! minus the envelope scaled to zero mean), and a Gaussian low-pass of width 0.8 * 2^(J-1); each
//! periodized in space over 5 x 5 copies, transformed, kept real, and cropped in Fourier to the
//! coarser resolutions the transform works at.

use super::fft2::Fft2;
use rustfft::num_complex::Complex;
use std::f64::consts::PI;

/// A filter in Fourier at resolutions 0, 1, ... (each level halves both sides).
pub struct Filter {
    /// The scale j (the low-pass: J).
    pub j: usize,
    /// Real Fourier coefficients, row-major, level r of size (M / 2^r) x (N / 2^r).
    pub levels: Vec<Vec<f64>>,
}

/// The wavelets (j-major, then theta) and the low-pass of a transform on M x N inputs.
pub struct FilterBank {
    /// psi_{j, theta}, in the order j * L + theta.
    pub psi: Vec<Filter>,
    /// phi_J.
    pub phi: Filter,
}

impl FilterBank {
    /// The bank for padded inputs of `m` x `n`, `j` scales and `l` angles.
    pub fn new(m: usize, n: usize, j: usize, l: usize) -> Self {
        let mut fft = Fft2::default();
        let fourier = |fft: &mut Fft2, space: Vec<Complex<f64>>| -> Vec<f64> {
            let mut data = space;
            fft.forward(&mut data, m, n);
            data.iter().map(|c| c.re).collect()
        };
        let levels_of = |x: &[f64], count: usize| (0..count).map(|r| periodize(x, m, n, r)).collect();
        let mut psi = Vec::with_capacity(j * l);
        for scale in 0..j {
            for theta in 0..l {
                let angle = ((l - l / 2 - 1) as f64 - theta as f64) * PI / l as f64;
                let sigma = 0.8 * 2f64.powi(scale as i32);
                let xi = 3.0 / 4.0 * PI / 2f64.powi(scale as i32);
                let space = morlet(m, n, sigma, angle, xi, 4.0 / l as f64);
                let x = fourier(&mut fft, space);
                psi.push(Filter { j: scale, levels: levels_of(&x, (scale + 1).min(j.saturating_sub(1).max(1))) });
            }
        }
        let x = fourier(&mut fft, gabor(m, n, 0.8 * 2f64.powi(j as i32 - 1), 0.0, 0.0, 1.0));
        Self { psi, phi: Filter { j, levels: levels_of(&x, j) } }
    }
}

/// The value of pi in Kymatio's Gabor normalisation, kept as written there so the filters match.
#[allow(clippy::approx_constant)]
const KYMATIO_PI: f64 = 3.1415;

/// A Gabor filter in space: the Gaussian envelope of width `sigma` (rotated by `theta`, its
/// second axis shrunk by `slant`) times e^{i xi (cos theta, sin theta) . u}, summed over 5 x 5
/// periods of the M x N grid, divided by Kymatio's normalisation 2 [`KYMATIO_PI`] sigma^2 / slant.
fn gabor(m: usize, n: usize, sigma: f64, theta: f64, xi: f64, slant: f64) -> Vec<Complex<f64>> {
    let (c, s) = (theta.cos(), theta.sin());
    // R diag(1, slant^2) R^-1 / (2 sigma^2).
    let d = slant * slant;
    let scale = 2.0 * sigma * sigma;
    let (c00, c01, c11) = ((c * c + d * s * s) / scale, (c * s - d * c * s) / scale, (s * s + d * c * c) / scale);
    let norm = 2.0 * KYMATIO_PI * sigma * sigma / slant;
    let mut out = vec![Complex::new(0.0, 0.0); m * n];
    for ex in -2i64..=2 {
        for ey in -2i64..=2 {
            for (i, row) in out.chunks_mut(n).enumerate() {
                let x = (ex * m as i64 + i as i64) as f64;
                for (jj, v) in row.iter_mut().enumerate() {
                    let y = (ey * n as i64 + jj as i64) as f64;
                    let re = -(c00 * x * x + 2.0 * c01 * x * y + c11 * y * y);
                    let im = x * xi * c + y * xi * s;
                    *v += Complex::from_polar(re.exp(), im);
                }
            }
        }
    }
    out.iter_mut().for_each(|v| *v /= norm);
    out
}

/// A Morlet filter: the Gabor filter minus its envelope times the constant that makes the sum
/// zero.
fn morlet(m: usize, n: usize, sigma: f64, theta: f64, xi: f64, slant: f64) -> Vec<Complex<f64>> {
    let wave = gabor(m, n, sigma, theta, xi, slant);
    let envelope = gabor(m, n, sigma, theta, 0.0, slant);
    let k = wave.iter().sum::<Complex<f64>>() / envelope.iter().sum::<Complex<f64>>();
    wave.iter().zip(&envelope).map(|(w, e)| w - k * e).collect()
}

/// `x` (M x N, Fourier) cropped to resolution `res`: the high frequencies a 2^res subsampling
/// folds over are zeroed, then the 2^res x 2^res copies are summed (Kymatio's
/// `periodize_filter_fft`).
fn periodize(x: &[f64], m: usize, n: usize, res: usize) -> Vec<f64> {
    let k = 1usize << res;
    let (mo, no) = (m / k, n / k);
    let band = |size: usize| {
        let len = (size as f64 * (1.0 - 0.5f64.powi(res as i32))) as usize;
        let start = (size as f64 * 0.5f64.powi(res as i32 + 1)) as usize;
        start..start + len
    };
    let (rows, cols) = (band(m), band(n));
    let mut crop = vec![0.0; mo * no];
    for (a, out) in crop.iter_mut().enumerate() {
        let (p, q) = (a / no, a % no);
        for i in 0..k {
            for jj in 0..k {
                let (r, c) = (p + i * mo, q + jj * no);
                if !rows.contains(&r) && !cols.contains(&c) {
                    *out += x[r * n + c];
                }
            }
        }
    }
    crop
}
