//! Laplacian smoothing (DP-LSSGD, Wang et al.): v -> A_s^{-1} v with A_s = I - s L, L the 1-D
//! discrete Laplacian with periodic boundary. A_s is circulant with eigenvalues
//! 1 + 2s - 2s cos(2 pi k / d), so the exact inverse is a circulant convolution whose taps have
//! the closed form c_k = (r^k + r^{d-k}) / ((1 - r^d) sqrt(1 + 4s)),
//! r = (1 + 2s - sqrt(1 + 4s)) / (2s), for every d (d = 1 and 2 included). The taps decay like
//! r^k, so the device kernel keeps the K on each side whose dropped mass is below
//! [`TRUNCATION_TOLERANCE`] (all d taps when d <= 2K + 1). The FFT solve is the CPU reference.

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

/// Bound on the taps the device kernel drops, relative to max |v| (far below f32 resolution).
pub const TRUNCATION_TOLERANCE: f64 = 1e-9;

/// The smoothing operator A_s^{-1} for one smoothing parameter s >= 0 (s = 0 is the identity).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LaplacianSmoothing {
    s: f64,
}

/// The circulant taps of A_s^{-1} for one length d.
#[derive(Debug, Clone, PartialEq)]
pub struct Taps {
    /// c_0..c_{m-1}.
    pub values: Vec<f32>,
    /// True when all d taps are kept (out_j = sum_k c_k v_{j-k}); false when the taps are
    /// truncated and symmetric (out_j = c_0 v_j + sum_{k>=1} c_k (v_{j+k} + v_{j-k})).
    pub full: bool,
    /// Bound on the dropped taps' mass: |out - A_s^{-1} v| <= bound * max |v|, elementwise.
    pub bound: f64,
}

impl LaplacianSmoothing {
    /// The operator for `s`; refuses a negative or non-finite s (A_s is then not positive definite).
    pub fn new(s: f64) -> Result<Self, String> {
        if s.is_finite() && s >= 0.0 {
            Ok(Self { s })
        } else {
            Err(format!("the smoothing parameter must be finite and >= 0, got {s}"))
        }
    }

    /// The smoothing parameter s.
    pub fn sigma(&self) -> f64 {
        self.s
    }

    /// Eigenvalue k of A_s for length d.
    pub fn eigenvalue(&self, k: usize, d: usize) -> f64 {
        1.0 + 2.0 * self.s - 2.0 * self.s * (std::f64::consts::TAU * k as f64 / d as f64).cos()
    }

    /// The decay ratio r of the taps (0 for s = 0).
    fn ratio(&self) -> f64 {
        if self.s == 0.0 { 0.0 } else { (1.0 + 2.0 * self.s - (1.0 + 4.0 * self.s).sqrt()) / (2.0 * self.s) }
    }

    /// The taps for length `d` (d >= 1), truncated where the dropped mass is below the tolerance.
    pub fn taps(&self, d: usize) -> Taps {
        assert!(d >= 1, "smoothing needs at least one element");
        let r = self.ratio();
        let norm = 1.0 / ((1.0 - r.powf(d as f64)) * (1.0 + 4.0 * self.s).sqrt());
        let tap = |k: usize| ((r.powf(k as f64) + r.powf((d - k) as f64)) * norm) as f32;
        // Dropped mass when keeping k = 0..=K on both sides: sum over K < k < d - K of c_k
        // <= 2 r^(K+1) norm / (1 - r).
        let dropped = |k: usize| 2.0 * r.powf(k as f64 + 1.0) * norm / (1.0 - r);
        let mut keep = 0;
        while dropped(keep) > TRUNCATION_TOLERANCE && 2 * keep + 1 < d {
            keep += 1;
        }
        if 2 * keep + 1 >= d {
            Taps { values: (0..d).map(tap).collect(), full: true, bound: 0.0 }
        } else {
            Taps { values: (0..=keep).map(tap).collect(), full: false, bound: dropped(keep) }
        }
    }

    /// A_s^{-1} v by FFT (the CPU reference): divide each Fourier coefficient by its eigenvalue.
    pub fn apply_fft(&self, v: &[f32]) -> Vec<f32> {
        let d = v.len();
        if d == 0 || self.s == 0.0 {
            return v.to_vec();
        }
        let spectrum = self.spectrum(d);
        let mut buf: Vec<Complex<f64>> = v.iter().map(|&x| Complex::new(f64::from(x), 0.0)).collect();
        spectrum.forward.process(&mut buf);
        for (c, divisor) in buf.iter_mut().zip(&spectrum.divisors) {
            *c /= divisor;
        }
        spectrum.inverse.process(&mut buf);
        buf.iter().map(|c| c.re as f32).collect()
    }

    /// The plans and divisors for length `d`, made on first use and kept for the process.
    fn spectrum(&self, d: usize) -> Arc<Spectrum> {
        let mut spectra = SPECTRA.lock().unwrap_or_else(PoisonError::into_inner);
        let spectrum = spectra.entry((d, self.s.to_bits())).or_insert_with(|| {
            let mut planner = FftPlanner::<f64>::new();
            Arc::new(Spectrum {
                forward: planner.plan_fft_forward(d),
                inverse: planner.plan_fft_inverse(d),
                divisors: (0..d).map(|k| self.eigenvalue(k, d) * d as f64).collect(),
            })
        });
        spectrum.clone()
    }
}

/// The FFT plans of one length and the divisors (eigenvalue times d) of one strength: planning
/// computes d twiddle factors and the divisors d cosines, as much work as the transforms
/// themselves, so a training run makes them once per tensor shape instead of every step.
struct Spectrum {
    forward: Arc<dyn Fft<f64>>,
    inverse: Arc<dyn Fft<f64>>,
    divisors: Vec<f64>,
}

/// Spectra by (length, s's bits).
type Spectra = HashMap<(usize, u64), Arc<Spectrum>>;

/// The process's spectra: one per parameter tensor shape of a run (24 bytes per coordinate of
/// each distinct shape).
static SPECTRA: LazyLock<Mutex<Spectra>> = LazyLock::new(Default::default);

/// The circulant convolution with `taps` on the host, as the device kernel computes it.
pub fn apply_taps(taps: &Taps, v: &[f32]) -> Vec<f32> {
    let d = v.len();
    let c = &taps.values;
    (0..d)
        .map(|j| {
            let mut acc = c[0] * v[j];
            if taps.full {
                for (k, ck) in c.iter().enumerate().skip(1) {
                    acc += ck * v[(j + d - k) % d];
                }
            } else {
                for (k, ck) in c.iter().enumerate().skip(1) {
                    acc += ck * (v[(j + k) % d] + v[(j + d - k) % d]);
                }
            }
            acc
        })
        .collect()
}
