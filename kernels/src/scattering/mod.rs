//! The 2-D scattering transform (Mallat 2012; Bruna and Mallat 2013) as Tramèr and Boneh (2021)
//! use it for private image classification, computed as Kymatio 0.3 computes it: the input
//! reflect-padded to a multiple of 2^J, then in Fourier, for order 0 the low-pass phi_J (x conv
//! phi_J), for order 1 |x conv psi_{j1, theta1}| conv phi_J, for order 2
//! ||x conv psi_{j1, theta1}| conv psi_{j2, theta2}| conv phi_J with j2 > j1, each subsampled by
//! 2^J and its border row and column dropped. With
//! J = 2, L = 8: 1 + 16 + 64 = 81 channels per input channel at a quarter of the resolution. A
//! fixed feature extractor with no trained parameter, checked against Kymatio's own output
//! (kernels/tests/scattering_oracle.rs).

mod fft2;
mod filters;
pub mod on_device;

use fft2::Fft2;
use filters::FilterBank;
use rayon::prelude::*;
use rustfft::num_complex::Complex;

/// A scattering transform of order 2 for M x N images.
pub struct Scattering2d {
    m: usize,
    n: usize,
    j: usize,
    padded: (usize, usize),
    bank: FilterBank,
}

impl Scattering2d {
    /// The transform of `j` scales and `l` angles for `m` x `n` inputs; None when an image of
    /// that size is too small for `j` scales (the reflect padding needs more rows than it has)
    /// or a size is zero.
    pub fn new(m: usize, n: usize, j: usize, l: usize) -> Option<Self> {
        let step = 1usize.checked_shl(u32::try_from(j).ok()?)?;
        let pad = |size: usize| ((size + step) / step + 1) * step;
        let padded = (pad(m), pad(n));
        let fits = |size: usize, to: usize| size > (to - size).div_ceil(2);
        if j == 0 || l == 0 || m == 0 || n == 0 || !fits(m, padded.0) || !fits(n, padded.1) {
            return None;
        }
        Some(Self { m, n, j, padded, bank: FilterBank::new(padded.0, padded.1, j, l) })
    }

    /// Output channels per input channel: 1 + J L + L^2 J (J - 1) / 2.
    pub fn channels(&self) -> usize {
        let (j, l) = (self.j, self.bank.psi.len() / self.j);
        1 + j * l + l * l * j * (j - 1) / 2
    }

    /// Output rows and columns.
    pub fn output_size(&self) -> (usize, usize) {
        (self.padded.0 / (1 << self.j) - 2, self.padded.1 / (1 << self.j) - 2)
    }

    /// Scalars of one input channel's output.
    pub fn output_len(&self) -> usize {
        let (mo, no) = self.output_size();
        self.channels() * mo * no
    }

    /// The scattering coefficients of the M x N image `x` (row-major): `channels()` maps of
    /// `output_size()`, channel-major, in Kymatio's order (order 0; order 1 by (j1, theta1);
    /// order 2 by (j1, theta1, j2, theta2)).
    pub fn transform(&self, x: &[f64]) -> Vec<f64> {
        assert_eq!(x.len(), self.m * self.n, "an image of {} x {}", self.m, self.n);
        let (pm, pn) = self.padded;
        let mut fft = Fft2::default();
        let mut u0 = reflect_pad(x, self.m, self.n, pm, pn);
        fft.forward(&mut u0, pm, pn);
        let mut out = Vec::with_capacity(self.output_len());
        let mut second = Vec::new();
        self.low_pass(&mut fft, &u0, (pm, pn), 0, &mut out);
        for psi1 in &self.bank.psi {
            let (j1, size1) = (psi1.j, (pm >> psi1.j, pn >> psi1.j));
            let mut u1 = subsample(&multiply(&u0, &psi1.levels[0]), (pm, pn), 1 << j1);
            modulus_in_fourier(&mut fft, &mut u1, size1);
            self.low_pass(&mut fft, &u1, size1, j1, &mut out);
            for psi2 in self.bank.psi.iter().filter(|p| p.j > j1) {
                let size2 = (pm >> psi2.j, pn >> psi2.j);
                let mut u2 = subsample(&multiply(&u1, &psi2.levels[j1]), size1, 1 << (psi2.j - j1));
                modulus_in_fourier(&mut fft, &mut u2, size2);
                self.low_pass(&mut fft, &u2, size2, psi2.j, &mut second);
            }
        }
        out.extend(second);
        out
    }

    /// The transforms of `images` (M x N each, an example's channels consecutive), in
    /// parallel and in order: `output_len()` scalars per image.
    pub fn transform_all(&self, images: &[f64]) -> Vec<f64> {
        images.par_chunks(self.m * self.n).flat_map_iter(|x| self.transform(x)).collect()
    }

    /// Appends `u` (in Fourier, at `size`, resolution `j`) low-passed by phi_J, subsampled to
    /// resolution J and unpadded, to `out`.
    fn low_pass(&self, fft: &mut Fft2, u: &[Complex<f64>], size: (usize, usize), j: usize, out: &mut Vec<f64>) {
        let mut s = subsample(&multiply(u, &self.bank.phi.levels[j]), size, 1 << (self.j - j));
        let (mo, no) = (size.0 >> (self.j - j), size.1 >> (self.j - j));
        fft.inverse(&mut s, mo, no);
        for r in 1..mo - 1 {
            out.extend(s[r * no + 1..r * no + no - 1].iter().map(|c| c.re));
        }
    }
}

/// `x` (m x n) reflect-padded (numpy's `reflect`: the edge is not repeated) to pm x pn, the
/// extra row and column going to the end when the padding is odd.
fn reflect_pad(x: &[f64], m: usize, n: usize, pm: usize, pn: usize) -> Vec<Complex<f64>> {
    let reflect = |i: i64, size: usize| {
        let period = 2 * (size as i64 - 1);
        let k = i.rem_euclid(period.max(1));
        (if k < size as i64 { k } else { period - k }) as usize
    };
    let (top, left) = (((pm - m) / 2) as i64, ((pn - n) / 2) as i64);
    (0..pm * pn)
        .map(|a| {
            let (r, c) = (reflect(a as i64 / pn as i64 - top, m), reflect(a as i64 % pn as i64 - left, n));
            Complex::new(x[r * n + c], 0.0)
        })
        .collect()
}

/// `u` times the real filter `f`, pointwise.
fn multiply(u: &[Complex<f64>], f: &[f64]) -> Vec<Complex<f64>> {
    u.iter().zip(f).map(|(a, b)| a * b).collect()
}

/// The Fourier transform of the spatial subsampling by `k` of the image whose transform is `u`
/// (at `size`): the mean of its k x k periodic copies.
fn subsample(u: &[Complex<f64>], size: (usize, usize), k: usize) -> Vec<Complex<f64>> {
    let (m, n) = size;
    if k == 1 {
        return u.to_vec();
    }
    let (mo, no) = (m / k, n / k);
    let mut out = vec![Complex::new(0.0, 0.0); mo * no];
    for (a, v) in out.iter_mut().enumerate() {
        let (p, q) = (a / no, a % no);
        for i in 0..k {
            for j in 0..k {
                *v += u[(p + i * mo) * n + q + j * no];
            }
        }
        *v /= (k * k) as f64;
    }
    out
}

/// Back to space, the modulus, and forward again, in place.
fn modulus_in_fourier(fft: &mut Fft2, u: &mut [Complex<f64>], size: (usize, usize)) {
    fft.inverse(u, size.0, size.1);
    u.iter_mut().for_each(|v| *v = Complex::new(v.norm(), 0.0));
    fft.forward(u, size.0, size.1);
}
