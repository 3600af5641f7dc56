//! Gaussian noise for the DP step from a counter-based ChaCha20 stream (a CSPRNG) keyed from the
//! OS; a `--seed` run keys it from the seed (stream 1) and is labelled reproducible. The noise is
//! drawn and added on the gradient's device by the fused kernel of `dp-kernels` (the ndarray
//! backend computes the same words on the host). Burn's own random tensors are not a CSPRNG and
//! are never used for privacy noise.

use crate::{NoiseScale, StreamPosition, gaussian::blocks_for, noisy_scale};
use burn::tensor::Tensor;
use dp_data::{ChaChaPosition, ChaChaState};

/// The noise stream of a run (its position serialises into checkpoints).
#[derive(Debug, Clone)]
pub struct GaussianNoise {
    state: ChaChaState,
}

/// The ChaCha20 stream reserved for noise.
pub const NOISE_STREAM: u64 = 1;

impl GaussianNoise {
    /// A stream keyed from the OS, or from `seed` for a reproducible run.
    pub fn new(seed: Option<u64>) -> Self {
        Self { state: ChaChaState::new(seed, NOISE_STREAM) }
    }

    /// A stream resumed from a checkpointed position.
    pub fn from_state(state: ChaChaState) -> Self {
        Self { state }
    }

    /// The stream of `start` (the run's noise stream at its beginning) resumed at the checkpointed
    /// `position` after `releases` releases of tensors of `sizes` scalars, refused unless that is
    /// exactly where those releases leave it: a rewound position would replay noise already used.
    pub fn resumed(
        start: ChaChaState,
        position: ChaChaPosition,
        releases: u64,
        sizes: &[usize],
    ) -> Result<Self, String> {
        let per_release: u64 = sizes.iter().map(|&n| blocks_for(n)).sum();
        let expected = releases.checked_mul(per_release).and_then(|b| u128::from(b).checked_mul(16));
        if position.stream != start.stream() || Some(position.word_pos) != expected {
            return Err(format!(
                "the noise stream is at word {} of stream {}, not where {releases} steps leave it",
                position.word_pos, position.stream
            ));
        }
        Ok(Self { state: ChaChaState::at(start.key().clone(), position) })
    }

    /// The stream's position.
    pub fn state(&self) -> &ChaChaState {
        &self.state
    }

    /// `(grad + sigma * z) * scale` with fresh standard normals z, in one pass on grad's device;
    /// `sigma` is one standard deviation for all coordinates or one per coordinate.
    pub fn perturb<const D: usize>(
        &mut self,
        grad: Tensor<D>,
        sigma: &NoiseScale,
        scale: f32,
    ) -> Result<Tensor<D>, String> {
        let n = grad.shape().num_elements();
        let position =
            StreamPosition { key: self.state.key_words(), stream: self.state.stream(), block: self.state.next_block() };
        let out = noisy_scale(grad, sigma, &position, scale)?;
        self.state = self.state.at_block(position.block + blocks_for(n));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_io::to_host;

    fn draw(noise: &mut GaussianNoise, shape: [usize; 2], std: f32) -> Vec<f32> {
        let device = crate::backend::cpu().device;
        to_host(&noise.perturb(Tensor::<2>::zeros(shape, &device), &NoiseScale::Uniform(std), 1.0).expect("noise"))
    }

    #[test]
    fn noise_has_the_requested_standard_deviation() {
        let mut noise = GaussianNoise::new(Some(3));
        let (n, std) = (200_000usize, 2.5);
        let x = draw(&mut noise, [400, 500], std as f32);
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
    fn seeded_streams_reproduce_resume_and_never_reuse_words() {
        let mut a = GaussianNoise::new(Some(9));
        let first = draw(&mut a, [2, 3], 1.0);
        let mut resumed = GaussianNoise::from_state(a.state().clone());
        let mut b = GaussianNoise::new(Some(9));
        assert_eq!(first, draw(&mut b, [2, 3], 1.0));
        let second = draw(&mut a, [2, 3], 1.0);
        assert_eq!(second, draw(&mut resumed, [2, 3], 1.0));
        assert_ne!(second, first, "a second draw reads new blocks");
        assert_ne!(draw(&mut GaussianNoise::new(None), [2, 3], 1.0), first);
    }
}
