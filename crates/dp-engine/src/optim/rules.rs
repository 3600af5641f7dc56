//! The update rules of a run, as burn-optim builds them (SGD with PyTorch's momentum convention,
//! Adam, AdamW; epsilon 1e-8 as in PyTorch): the privatised gradient reaches them as Burn's
//! `GradientsParams`, and their state is saved with Burn's records in the checkpoint.

use crate::backend::DeviceError;
use crate::error::{EngineError, Result};
use burn::module::{Module, Param};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, AdamWConfig, GradientsParams, ModuleOptimizer, SgdConfig};
use burn::tensor::{Device, Tensor, TensorData};
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

/// How an optimiser moves a parameter, told from its behaviour (burn-optim's `ModuleOptimizer`
/// does not say which rule it wraps): what a mechanism defined for one family checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateRule {
    /// Along the gradient, each coordinate by its own gradient (SGD, with or without momentum).
    Plain,
    /// Each coordinate scaled by its own gradients' history (Adam, AdamW).
    Adaptive,
    /// Neither recognisably (an optimiser of the user's own).
    Unknown,
}

impl OptimizerName {
    /// The family of this rule.
    pub fn rule(self) -> UpdateRule {
        match self {
            OptimizerName::Sgd => UpdateRule::Plain,
            OptimizerName::Adam | OptimizerName::Adamw => UpdateRule::Adaptive,
        }
    }
}

/// A module of one parameter, for watching an optimiser's first step.
#[derive(Module, Debug)]
struct Probe {
    w: Param<Tensor<1>>,
}

/// The family of `optimizer`, from one step of a copy of it (its state untouched) on a parameter
/// of two zero coordinates whose gradients are a thousandfold apart: SGD moves them a thousandfold
/// apart, Adam by about the learning rate each. Weight decay (at zero), momentum (a first step),
/// gradient clipping by norm and Nesterov's variant keep the ratio.
pub fn update_rule(optimizer: &ModuleOptimizer, device: &Device) -> Result<UpdateRule> {
    let probe = Probe { w: Param::from_tensor(Tensor::zeros([2], device)) }.train();
    let mut grads = GradientsParams::new();
    grads.register(probe.w.id, Tensor::<1>::from_data(TensorData::new(vec![1e-3f32, 1.0], [2]), device));
    let moved = optimizer.clone().step(1.0, probe, grads);
    let steps = moved
        .w
        .val()
        .into_data()
        .try_to_vec::<f32>()
        .map_err(|e| EngineError::Device(DeviceError(format!("{e:?}"))))?;
    let (small, large) = (steps[0].abs(), steps[1].abs());
    Ok(match small / large {
        r if !r.is_finite() || large == 0.0 => UpdateRule::Unknown,
        r if r < 0.01 => UpdateRule::Plain,
        r if r > 0.1 => UpdateRule::Adaptive,
        _ => UpdateRule::Unknown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_update_rule_is_told_from_each_optimizer_and_its_options() {
        let device = crate::backend::cpu().device;
        let rule = |o: ModuleOptimizer| update_rule(&o, &device).expect("a probe step");
        for (momentum, decay) in [(0.0, 0.0), (0.9, 0.0), (0.0, 5e-4), (0.9, 5e-4)] {
            assert_eq!(rule(optimizer(OptimizerName::Sgd, momentum, decay)), UpdateRule::Plain);
            assert_eq!(rule(optimizer(OptimizerName::Adam, momentum, decay)), UpdateRule::Adaptive);
            assert_eq!(rule(optimizer(OptimizerName::Adamw, momentum, decay)), UpdateRule::Adaptive);
        }
        assert_eq!(rule(SgdConfig::new().init()), OptimizerName::Sgd.rule());
        assert_eq!(rule(AdamConfig::new().init()), OptimizerName::Adam.rule());
    }
}
