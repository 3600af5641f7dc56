//! The activation tape of one forward pass. Burn 0.22 has no module hooks and no gradients of
//! non-leaf tensors, so each DP layer records its input and adds a zero "probe" leaf that requires
//! grad to its output: after one backward of the summed loss, the probe's gradient is dL/dz for
//! every example at once, which with the input gives each example's parameter gradient.

use crate::error::{EngineError, Result};
use burn::tensor::{Device, Gradients, Tensor};

/// What a DP layer records of its input: the rows of a dense layer, or the unfolded patches of a
/// convolution, detached from the graph.
#[derive(Debug, Clone)]
pub enum Recorded {
    /// Input rows a [B, in].
    Rows(Tensor<2>),
    /// Unfolded input patches U [B, Cin*k*k, P].
    Patches(Tensor<3>),
}

/// One DP layer's record: its input (detached) and the probe added to its flattened output.
#[derive(Debug)]
struct TapeEntry {
    input: Recorded,
    probe: Tensor<2>,
}

/// A DP layer's input and the gradient of the summed loss with respect to its output.
#[derive(Debug, Clone)]
pub struct LayerIo {
    /// The layer's recorded input.
    pub input: Recorded,
    /// dL/dz: the gradient of the summed loss with respect to the layer's pre-activation output,
    /// flattened to [batch, everything else].
    pub output_grad: Tensor<2>,
}

/// Records DP layers' inputs and probes during a forward pass.
#[derive(Debug)]
pub struct Tape {
    device: Device,
    entries: Vec<TapeEntry>,
}

impl Tape {
    /// An empty tape whose probes live on `device` with autodiff enabled.
    pub fn new(device: &Device) -> Self {
        Self { device: device.clone().autodiff(), entries: Vec::new() }
    }

    /// Records `input` and returns `output` plus a fresh zero probe that requires grad.
    pub fn record<const D: usize>(&mut self, input: Recorded, output: Tensor<D>) -> Tensor<D> {
        let dims = output.dims();
        let flat = output.flatten::<2>(1, D - 1);
        let probe = Tensor::<2>::zeros(flat.dims(), &self.device).require_grad();
        let input = match input {
            Recorded::Rows(t) => Recorded::Rows(t.inner()),
            Recorded::Patches(t) => Recorded::Patches(t.inner()),
        };
        self.entries.push(TapeEntry { input, probe: probe.clone() });
        (flat + probe).reshape(dims)
    }

    /// Each recorded layer's input and output gradient, in forward order.
    pub fn layer_gradients(self, grads: &Gradients) -> Result<Vec<LayerIo>> {
        let missing = || EngineError::Diverged("a DP layer received no gradient (it does not reach the loss)".into());
        self.entries
            .into_iter()
            .map(|e| {
                let output_grad = e.probe.grad(grads).ok_or_else(missing)?.inner();
                Ok(LayerIo { input: e.input, output_grad })
            })
            .collect()
    }
}
