//! The DP dense layer: z = a W + b, with W stored [in, out] and b [1, out].

use crate::init::uniform_fan_in;
use crate::per_example::PerExampleGrad;
use crate::tape::{LayerIo, Recorded, Tape};
use burn::tensor::{Device, Tensor};
use rand_chacha::ChaCha20Rng;

/// A dense layer whose per-example gradient norms are computed from its tape record.
#[derive(Debug, Clone)]
pub struct DpLinear {
    /// Weight [in, out].
    pub weight: Tensor<2>,
    /// Bias [1, out].
    pub bias: Tensor<2>,
}

impl DpLinear {
    /// A layer from `d_in` to `d_out` features, initialised from `rng`.
    pub fn new(d_in: usize, d_out: usize, rng: &mut ChaCha20Rng, device: &Device) -> Self {
        Self {
            weight: uniform_fan_in(rng, [d_in, d_out], d_in, device),
            bias: uniform_fan_in(rng, [1, d_out], d_in, device),
        }
    }

    /// Input and output widths.
    pub fn dims(&self) -> [usize; 2] {
        self.weight.dims()
    }

    /// z = x W + b; with a tape, records x and adds the probe.
    pub fn forward(&self, x: Tensor<2>, tape: Option<&mut Tape>) -> Tensor<2> {
        let z = x.clone().matmul(self.weight.clone()) + self.bias.clone();
        match tape {
            Some(tape) => tape.record(Recorded::Rows(x), z),
            None => z,
        }
    }

    /// The per-example gradient operands from this layer's tape record.
    pub fn per_example(&self, io: LayerIo) -> PerExampleGrad {
        let Recorded::Rows(input) = io.input else { unreachable!("a dense layer records its input rows") };
        PerExampleGrad::Linear { input, grad: io.output_grad }
    }
}
