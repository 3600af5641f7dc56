//! The update rules of a run, as burn-optim builds them (SGD with PyTorch's momentum convention,
//! Adam, AdamW; epsilon 1e-8 as in PyTorch): the privatised gradient reaches them as Burn's
//! `GradientsParams`, and their state is saved with Burn's records in the checkpoint.

use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, AdamWConfig, ModuleOptimizer, SgdConfig};
use serde::{Deserialize, Serialize};

/// Update rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OptimizerName {
    /// SGD with (heavy-ball) momentum.
    Sgd,
    /// Adam (Kingma & Ba), weight decay added to the gradient.
    Adam,
    /// AdamW (Loshchilov & Hutter): decoupled weight decay.
    Adamw,
}

/// PyTorch's Adam and AdamW epsilon (burn-optim's default is 1e-5).
const ADAM_EPSILON: f32 = 1e-8;

/// The optimiser `name` with `momentum` (SGD only, without dampening as in PyTorch) and
/// `weight_decay` (an L2 term for SGD and Adam, decoupled for AdamW).
pub fn optimizer(name: OptimizerName, momentum: f64, weight_decay: f64) -> ModuleOptimizer {
    let decay = (weight_decay > 0.0).then(|| WeightDecayConfig::new(weight_decay as f32));
    match name {
        OptimizerName::Sgd => {
            let momentum = (momentum > 0.0).then(|| MomentumConfig::new().with_momentum(momentum).with_dampening(0.0));
            SgdConfig::new().with_momentum(momentum).with_weight_decay(decay).init()
        }
        OptimizerName::Adam => AdamConfig::new().with_epsilon(ADAM_EPSILON).with_weight_decay(decay).init(),
        OptimizerName::Adamw => {
            AdamWConfig::new().with_epsilon(ADAM_EPSILON).with_weight_decay(weight_decay as f32).init()
        }
    }
}
