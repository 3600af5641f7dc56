//! What a built-in mechanism's file declares to the registry (`registry::BUILTIN`): its name as
//! users type it, the keys of its own options and its constructor, and those options, typed. The
//! mechanisms import this file, the registry imports them: no file imports another back.

use super::Mechanism;
use crate::error::Result;
use crate::privacy::mechanism::smoothing::SmoothingScope;
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

/// The built-in mechanisms' own options, each read by the mechanisms whose registry line names
/// its key (None: that mechanism's default). A library user sets the fields; a configuration
/// file's keys deserialize into it, and a key it does not know is refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MechanismOptions {
    /// ls-sgd, ls-adam: the smoothing parameter s (0: plain DP-SGD) [default: 1].
    pub ls_sigma: Option<f64>,
    /// ls-sgd, ls-adam: smooth each parameter tensor, or the model as one vector [default: tensor].
    pub ls_scope: Option<SmoothingScope>,
    /// optimized-paper: recompute the sensitivity w every this many lots [default: 1, the paper's].
    pub sensitivity_every: Option<u64>,
}

impl MechanismOptions {
    /// Every option's key, as configuration files write it.
    pub const KEYS: [&'static str; 3] = ["ls_sigma", "ls_scope", "sensitivity_every"];

    /// The keys of the options set.
    pub fn keys(&self) -> Vec<&'static str> {
        let set = [self.ls_sigma.is_some(), self.ls_scope.is_some(), self.sensitivity_every.is_some()];
        Self::KEYS.into_iter().zip(set).filter_map(|(key, set)| set.then_some(key)).collect()
    }
}

/// A built-in mechanism: its name, the keys of the options it reads, and its constructor.
pub struct Registered {
    /// The name users type.
    pub name: MechanismName,
    /// The keys of its own options (of [`MechanismOptions::KEYS`]).
    pub options: &'static [&'static str],
    /// Builds it from its options (only those of `options` are set).
    pub build: fn(&MechanismOptions) -> Result<Arc<dyn Mechanism>>,
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
