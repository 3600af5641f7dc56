//! DP-LSSGD / DP-LSAdam (Wang et al.): DP-SGD whose noisy gradient is multiplied by A_s^{-1}
//! (`crate::privacy::mechanism::smoothing`) before the optimiser. Smoothing acts after the noise: post-processing,
//! so the epsilon is that of the Gaussian mechanism.

use super::registered::{MechanismOptions, Registered};
use super::{Mechanism, MechanismName};
use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use crate::optim::rules::{OptimizerName, UpdateRule};
use crate::privacy::mechanism::smoothing::{Smoothing, SmoothingScope};
use burn::tensor::Tensor;
use dp_kernels::LaplacianSmoothing;
use std::sync::Arc;

/// The smoothed mechanism for `optimizer` from its options (s = 1 and each tensor by default).
fn build(options: &MechanismOptions, optimizer: OptimizerName) -> Result<Arc<dyn Mechanism>> {
    let sigma = options.ls_sigma.unwrap_or(1.0);
    Ok(Arc::new(LaplacianSmoothed::new(sigma, optimizer)?.with_scope(options.ls_scope.unwrap_or_default())))
}

/// The keys of its options.
const KEYS: &[&str] = &["ls_sigma", "ls_scope"];

/// The registry's entry of DP-LSSGD.
pub(super) const LS_SGD: Registered =
    Registered { name: MechanismName::LsSgd, options: KEYS, build: |o| build(o, OptimizerName::Sgd) };

/// The registry's entry of DP-LSAdam.
pub(super) const LS_ADAM: Registered =
    Registered { name: MechanismName::LsAdam, options: KEYS, build: |o| build(o, OptimizerName::Adam) };

/// The Gaussian mechanism followed by Laplacian smoothing, for SGD or Adam.
pub struct LaplacianSmoothed {
    smoothing: Smoothing,
    optimizer: OptimizerName,
}

impl LaplacianSmoothed {
    /// DP-LSSGD with smoothing parameter `sigma`, per parameter tensor.
    pub fn sgd(sigma: f64) -> Result<Self> {
        Self::new(sigma, OptimizerName::Sgd)
    }

    /// DP-LSAdam with smoothing parameter `sigma`, per parameter tensor.
    pub fn adam(sigma: f64) -> Result<Self> {
        Self::new(sigma, OptimizerName::Adam)
    }

    /// Smoothing with parameter `sigma` (refused unless finite and non-negative) for `optimizer`.
    fn new(sigma: f64, optimizer: OptimizerName) -> Result<Self> {
        let operator = LaplacianSmoothing::new(sigma).map_err(|e| EngineError::invalid("ls-sigma", e))?;
        Ok(Self { smoothing: Smoothing { operator, scope: SmoothingScope::Tensor }, optimizer })
    }

    /// Smooths each parameter tensor, or the whole model as one vector.
    pub fn with_scope(mut self, scope: SmoothingScope) -> Self {
        self.smoothing.scope = scope;
        self
    }
}

impl Mechanism for LaplacianSmoothed {
    fn name(&self) -> &'static str {
        match self.optimizer {
            OptimizerName::Sgd => "ls-sgd",
            OptimizerName::Adam | OptimizerName::Adamw => "ls-adam",
        }
    }

    fn accepts_update(&self, rule: UpdateRule) -> Result<()> {
        match (self.optimizer.rule(), rule) {
            (UpdateRule::Adaptive, UpdateRule::Plain) => {
                Err(EngineError::invalid("optimizer", "ls-adam is DP-LSAdam; use the ls-sgd mechanism for SGD"))
            }
            (UpdateRule::Plain, UpdateRule::Adaptive) => {
                Err(EngineError::invalid("optimizer", "ls-sgd is DP-LSSGD; use the ls-adam mechanism for Adam"))
            }
            _ => Ok(()),
        }
    }

    fn post_process(&self, grads: Vec<Tensor<1>>, table: &ParamTable) -> Result<Vec<Tensor<1>>> {
        self.smoothing.apply(grads, table)
    }

    fn notes(&self) -> Vec<String> {
        vec!["Laplacian smoothing acts on the noisy gradient: post-processing, so the epsilon is that of the Gaussian mechanism".into()]
    }
}
