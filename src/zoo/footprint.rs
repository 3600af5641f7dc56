//! What a model needs in memory for one training step, from arithmetic on its shapes alone, so
//! that an absurd input size or batch is refused before anything is allocated (an allocation
//! failure aborts the process). An estimate that errs high: the parameters in all their copies
//! (value, gradient, clipped sum, noisy release, two optimiser moments) and, per example, every
//! layer's output with an im2col unfolding for each convolution, kept for the backward pass,
//! with their gradients and the per-example norms' temporaries.

/// Copies of the parameters a step may hold at once.
const PARAM_COPIES: u128 = 6;
/// Copies of each example's activations a step may hold at once.
const ACTIVATION_COPIES: u128 = 3;

/// Parameters and per-example activations of a model, in f32 scalars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Footprint {
    /// Scalar parameters.
    pub params: u128,
    /// Scalars of one example's input and activations (convolutions counted with their unfolding).
    pub activations: u128,
}

impl Footprint {
    /// The footprint of a model's input alone.
    pub fn of_input(input: [usize; 3]) -> Self {
        Self { params: 0, activations: input.iter().map(|&d| d as u128).product() }
    }

    /// Adds `n` activations per example.
    pub fn add_activations(&mut self, n: usize) {
        self.activations = self.activations.saturating_add(n as u128);
    }

    /// Adds a k x k convolution from `c_in` to `c_out` channels with an `out` output plane: its
    /// unfolded input and its output.
    pub fn add_conv(&mut self, c_in: usize, c_out: usize, kernel: usize, out: [usize; 2]) {
        let plane = out[0] as u128 * out[1] as u128;
        let unfolded = (c_in * kernel * kernel) as u128 * plane;
        self.activations = self.activations.saturating_add(unfolded).saturating_add(c_out as u128 * plane);
    }

    /// Bytes of one step on physical batches of `batch` examples (None: beyond any machine).
    pub fn step_bytes(&self, batch: usize) -> Option<u128> {
        let params = self.params.checked_mul(PARAM_COPIES)?;
        let activations = self.activations.checked_mul(batch as u128)?.checked_mul(ACTIVATION_COPIES)?;
        params.checked_add(activations)?.checked_mul(4)
    }
}
