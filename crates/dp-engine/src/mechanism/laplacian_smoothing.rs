//! DP-LSSGD / DP-LSAdam (Wang et al.): DP-SGD whose noisy gradient is multiplied by A_s^{-1}
//! (`crate::smoothing`) before the optimiser. Smoothing acts after the noise: post-processing,
//! so the epsilon is that of the Gaussian mechanism.

use super::Mechanism;
use crate::clipping::Clipping;
use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use crate::smoothing::Smoothing;
use crate::train_config::{MechanismName, OptimizerName, TrainConfig};
use burn::tensor::Tensor;
use dp_kernels::LaplacianSmoothing;

/// The Gaussian mechanism followed by Laplacian smoothing, for SGD or Adam.
pub struct LaplacianSmoothed {
    smoothing: Smoothing,
    optimizer: OptimizerName,
}

impl LaplacianSmoothed {
    /// The smoothing the run's `ls_sigma` and `ls_scope` say, for `optimizer`.
    pub fn new(config: &TrainConfig, optimizer: OptimizerName) -> Result<Self> {
        let operator = LaplacianSmoothing::new(config.ls_sigma).map_err(|e| EngineError::invalid("ls-sigma", e))?;
        Ok(Self { smoothing: Smoothing { operator, scope: config.ls_scope }, optimizer })
    }
}

impl Mechanism for LaplacianSmoothed {
    fn name(&self) -> MechanismName {
        match self.optimizer {
            OptimizerName::Sgd => MechanismName::LsSgd,
            OptimizerName::Adam | OptimizerName::Adamw => MechanismName::LsAdam,
        }
    }

    fn default_optimizer(&self) -> OptimizerName {
        self.optimizer
    }

    fn options(&self) -> &'static [&'static str] {
        &["ls_sigma", "ls_scope"]
    }

    fn validate(&self, config: &TrainConfig, _clipping: Clipping) -> Result<()> {
        match (self.optimizer, config.optimizer) {
            (OptimizerName::Adam, Some(OptimizerName::Sgd)) => {
                Err(EngineError::invalid("optimizer", "ls-adam is DP-LSAdam; use --mechanism ls-sgd for SGD"))
            }
            (OptimizerName::Sgd, Some(OptimizerName::Adam | OptimizerName::Adamw)) => {
                Err(EngineError::invalid("optimizer", "ls-sgd is DP-LSSGD; use --mechanism ls-adam for Adam"))
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
