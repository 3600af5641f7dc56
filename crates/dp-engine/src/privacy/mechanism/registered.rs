//! What a built-in mechanism's file declares to the registry (`registry::BUILTIN`): its name as
//! users type it, its option keys and its constructor, and how its typed options are read. The
//! mechanisms import this file, the registry imports them: no file imports another back.

use super::Mechanism;
use crate::error::{EngineError, Result, one_line};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The names of the built-in mechanisms, as users type them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MechanismName {
    /// No clipping, no noise: the unperturbed baseline (no privacy).
    None,
    /// DP-SGD / DP-Adam: per-example clipping and Gaussian noise.
    Gaussian,
    /// DP-LSSGD (Wang et al.): DP-SGD whose noisy gradient is Laplacian-smoothed (post-processing).
    LsSgd,
    /// DP-LSAdam: the smoothed gradient fed to Adam.
    LsAdam,
    /// The optimized additive noise mechanism, sound: per-layer clipping and a sigma per layer
    /// from Xiang et al.'s solver at the calibrated noise multiplier.
    Optimized,
    /// Xiang et al.'s Algorithm 1 as written (label paper-bound; its sigma's own epsilon: none).
    OptimizedPaper,
}

/// A built-in mechanism: its name, the configuration keys it reads, and its constructor.
pub struct Registered {
    /// The name users type.
    pub name: MechanismName,
    /// The configuration keys of its own options.
    pub options: &'static [&'static str],
    /// Builds it from its options (only keys of `options` are passed).
    pub build: fn(&toml::Table) -> Result<Arc<dyn Mechanism>>,
}

/// A mechanism's typed options read from its configuration keys.
pub fn typed_options<T: DeserializeOwned>(options: &toml::Table) -> Result<T> {
    T::deserialize(toml::Value::Table(options.clone()))
        .map_err(|e| EngineError::invalid("mechanism option", one_line(&e.to_string())))
}

impl std::fmt::Display for MechanismName {
    /// The name as users type it ("ls-sgd").
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MechanismName::None => "none",
            MechanismName::Gaussian => "gaussian",
            MechanismName::LsSgd => "ls-sgd",
            MechanismName::LsAdam => "ls-adam",
            MechanismName::Optimized => "optimized",
            MechanismName::OptimizedPaper => "optimized-paper",
        })
    }
}
