//! Gaussian noise for the DP step, drawn from ChaCha20 (a CSPRNG) keyed from the OS; a `--seed`
//! run keys it from the seed (stream 1) and is labelled reproducible. Burn's own random tensors are
//! not a CSPRNG and are never used for privacy noise.

use crate::tensor_io::matrix;
use burn::tensor::{Device, Tensor};
use dp_data::ChaChaState;
use rand_distr::{Distribution, StandardNormal};

/// The noise stream of a run (its position serialises into checkpoints).
#[derive(Debug, Clone)]
pub struct GaussianNoise {
    state: ChaChaState,
}

/// The ChaCha20 stream reserved for noise.
const NOISE_STREAM: u64 = 1;

impl GaussianNoise {
    /// A stream keyed from the OS, or from `seed` for a reproducible run.
    pub fn new(seed: Option<u64>) -> Self {
        Self { state: ChaChaState::new(seed, NOISE_STREAM) }
    }

    /// A stream resumed from a checkpointed position.
    pub fn from_state(state: ChaChaState) -> Self {
        Self { state }
    }

    /// The stream's position.
    pub fn state(&self) -> &ChaChaState {
        &self.state
    }

    /// A [rows, cols] tensor of independent N(0, std^2) draws.
    pub fn sample(&mut self, shape: [usize; 2], std: f64, device: &Device) -> Tensor<2> {
        let mut rng = self.state.restore();
        let values = (0..shape[0] * shape[1])
            .map(|_| {
                let z: f64 = StandardNormal.sample(&mut rng);
                (z * std) as f32
            })
            .collect();
        self.state = ChaChaState::capture(&rng);
        matrix(values, shape, device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_io::to_host;

    #[test]
    fn noise_has_the_requested_standard_deviation() {
        let device = crate::backend::cpu().device;
        let mut noise = GaussianNoise::new(Some(3));
        let (n, std) = (200_000usize, 2.5);
        let x = to_host(&noise.sample([400, 500], std, &device));
        let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / n as f64;
        let var = x.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        // Standard errors: mean std/sqrt(n) = 0.0056; sample sd about std/sqrt(2n) = 0.004.
        assert!(mean.abs() < 5.0 * std / (n as f64).sqrt(), "mean {mean}");
        assert!((var.sqrt() - std).abs() < 5.0 * std / (2.0 * n as f64).sqrt(), "sd {}", var.sqrt());
        // Tails: P(|Z| > 3) = 0.0027, so about 540 of 200k; the binomial sd is 23.
        let beyond = x.iter().filter(|&&v| f64::from(v).abs() > 3.0 * std).count() as f64;
        assert!((beyond - 540.0).abs() < 5.0 * 23.2, "{beyond} beyond 3 sigma");
    }

    #[test]
    fn seeded_streams_reproduce_and_resume() {
        let device = crate::backend::cpu().device;
        let mut a = GaussianNoise::new(Some(9));
        let first = to_host(&a.sample([2, 3], 1.0, &device));
        let mut resumed = GaussianNoise::from_state(a.state().clone());
        let mut b = GaussianNoise::new(Some(9));
        assert_eq!(first, to_host(&b.sample([2, 3], 1.0, &device)));
        assert_eq!(to_host(&a.sample([2, 3], 1.0, &device)), to_host(&resumed.sample([2, 3], 1.0, &device)));
        assert_ne!(to_host(&GaussianNoise::new(None).sample([2, 3], 1.0, &device)), first);
    }
}
