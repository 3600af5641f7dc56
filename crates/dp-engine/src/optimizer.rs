//! SGD with momentum and Adam over the model's parameter list. They are written here (a few tensor
//! ops each) rather than taken from burn-optim because their state must be checkpointed together
//! with the privacy ledger, sampler and noise stream in one atomic file.

use crate::error::{EngineError, Result};
use crate::tensor_io::{HostMatrix, matrices_from_host, matrices_to_host};
use burn::tensor::{Device, Tensor};
use serde::{Deserialize, Serialize};

/// Which update rule, with its hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum OptimizerKind {
    /// v = momentum * v + g; theta -= lr * v (PyTorch's convention).
    Sgd {
        /// Momentum in [0, 1).
        momentum: f64,
    },
    /// Adam (Kingma & Ba) with bias correction.
    Adam {
        /// First-moment decay.
        beta1: f64,
        /// Second-moment decay.
        beta2: f64,
        /// Denominator guard.
        epsilon: f64,
    },
}

impl OptimizerKind {
    /// Checks the hyper-parameters.
    pub fn validate(&self) -> Result<()> {
        let unit = |name, v: f64| {
            if (0.0..1.0).contains(&v) {
                Ok(())
            } else {
                Err(EngineError::invalid(name, format!("{v} is not in [0, 1)")))
            }
        };
        match *self {
            OptimizerKind::Sgd { momentum } => unit("momentum", momentum),
            OptimizerKind::Adam { beta1, beta2, epsilon } => {
                unit("beta1", beta1)?;
                unit("beta2", beta2)?;
                if epsilon.is_finite() && epsilon > 0.0 {
                    Ok(())
                } else {
                    Err(EngineError::invalid("adam epsilon", format!("{epsilon} is not positive")))
                }
            }
        }
    }
}

/// An optimiser's state for every parameter: momentum buffers, or Adam's two moments.
#[derive(Debug, Clone)]
pub struct Optimizer {
    kind: OptimizerKind,
    steps: u64,
    /// One list per parameter: [velocity] for SGD, [m, v] for Adam (empty until the first step).
    buffers: Vec<Vec<Tensor<2>>>,
}

/// The host copy of an optimiser's state, for checkpoints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OptimizerState {
    /// Update rule.
    pub kind: OptimizerKind,
    /// Steps taken.
    pub steps: u64,
    /// Buffers: per parameter, per buffer.
    pub buffers: Vec<Vec<HostMatrix>>,
}

impl Optimizer {
    /// A fresh optimiser.
    pub fn new(kind: OptimizerKind) -> Result<Self> {
        kind.validate()?;
        Ok(Self { kind, steps: 0, buffers: Vec::new() })
    }

    /// Applies one update with learning rate `lr` and returns the new parameters.
    pub fn step(&mut self, lr: f64, params: Vec<Tensor<2>>, grads: Vec<Tensor<2>>) -> Vec<Tensor<2>> {
        self.steps += 1;
        if self.buffers.len() != params.len() {
            self.buffers = params.iter().map(|_| Vec::new()).collect();
        }
        let t = self.steps as i32;
        params
            .into_iter()
            .zip(grads)
            .zip(self.buffers.iter_mut())
            .map(|((p, g), buf)| match self.kind {
                OptimizerKind::Sgd { momentum } => {
                    let v = match buf.pop() {
                        Some(v) if momentum > 0.0 => v.mul_scalar(momentum) + g,
                        _ => g,
                    };
                    buf.push(v.clone());
                    p - v.mul_scalar(lr)
                }
                OptimizerKind::Adam { beta1, beta2, epsilon } => {
                    let (m, v) = match (buf.pop(), buf.pop()) {
                        (Some(v), Some(m)) => (m, v),
                        _ => (g.zeros_like(), g.zeros_like()),
                    };
                    let m = m.mul_scalar(beta1) + g.clone().mul_scalar(1.0 - beta1);
                    let v = v.mul_scalar(beta2) + g.square().mul_scalar(1.0 - beta2);
                    let m_hat = m.clone().div_scalar(1.0 - beta1.powi(t));
                    let v_hat = v.clone().div_scalar(1.0 - beta2.powi(t));
                    buf.push(m);
                    buf.push(v);
                    p - (m_hat / v_hat.sqrt().add_scalar(epsilon)).mul_scalar(lr)
                }
            })
            .collect()
    }

    /// The state on the host.
    pub fn state(&self) -> OptimizerState {
        let buffers = self.buffers.iter().map(|bufs| matrices_to_host(bufs)).collect();
        OptimizerState { kind: self.kind, steps: self.steps, buffers }
    }

    /// An optimiser resumed from a checkpointed state on `device`.
    pub fn from_state(state: OptimizerState, device: &Device) -> Result<Self> {
        state.kind.validate()?;
        let bad = || EngineError::invalid("optimizer state", "a buffer's values do not fit its shape");
        let buffers = state
            .buffers
            .into_iter()
            .map(|bufs| matrices_from_host(bufs, device).ok_or_else(bad))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { kind: state.kind, steps: state.steps, buffers })
    }
}
