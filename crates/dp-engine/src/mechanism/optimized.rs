//! `--mechanism optimized`, Xiang et al.'s allocation made sound (docs/ARCHITECTURE.md, "The
//! optimized additive noise mechanism"): per-layer clipping to C_g = C / sqrt(G) and one sigma per
//! layer with sum_g C_g^2 / sigma_g^2 = 1 / z^2, so the step is exactly the Gaussian mechanism
//! with noise multiplier z; the weights come from past releases (post-processing).

use super::Mechanism;
use crate::allocation::NoiseAllocation;
use crate::clipping::Clipping;
use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use crate::train_config::{MechanismName, TrainConfig};

/// The sound optimized additive noise mechanism.
pub struct Optimized;

impl Mechanism for Optimized {
    fn name(&self) -> MechanismName {
        MechanismName::Optimized
    }

    fn default_clipping(&self) -> Clipping {
        Clipping::PerLayer
    }

    fn validate(&self, _config: &TrainConfig, clipping: Clipping) -> Result<()> {
        if clipping == Clipping::Flat {
            return Err(EngineError::invalid(
                "clipping",
                "optimized earns its per-layer noise from per-layer clipping; flat clipping would make it plain DP-SGD",
            ));
        }
        Ok(())
    }

    fn allocation(&self, z: f64, config: &TrainConfig, table: &ParamTable) -> NoiseAllocation {
        let layers = table.layers().len();
        NoiseAllocation::Groups {
            noise_multiplier: z,
            bounds: vec![Clipping::PerLayer.layer_bound(config.clip_norm, layers); layers],
            released: None,
        }
    }

    fn notes(&self) -> Vec<String> {
        vec!["optimized: per-layer clipping, a sigma per layer with sum_g C_g^2 / sigma_g^2 = 1 / z^2 (exactly the Gaussian mechanism with noise multiplier z), allocated from past released gradients (post-processing)".into()]
    }
}
