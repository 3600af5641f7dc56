//! Checkpoints: the model, optimiser, privacy ledger, sampler and noise-stream positions of a run,
//! written atomically (temporary file, fsync, rename) so that a run killed at any moment resumes
//! from a complete state and its ledger never loses a step.

use crate::error::{EngineError, Result};
use crate::optimizer::OptimizerState;
use crate::tensor_io::HostMatrix;
use crate::train_config::TrainConfig;
use dp_accounting::PrivacyLedger;
use dp_data::{ChaChaState, LotSampler};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::Path;

/// Format version written into every checkpoint.
pub const CHECKPOINT_VERSION: u32 = 1;

/// Everything needed to continue a run exactly where it stopped.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Format version.
    pub version: u32,
    /// The run's configuration.
    pub config: TrainConfig,
    /// The noise multiplier in use (calibrated or given); None for the unperturbed baseline.
    pub noise_multiplier: Option<f64>,
    /// Steps the run plans in total.
    pub planned_steps: u64,
    /// Steps taken so far.
    pub step: u64,
    /// Every privatised step taken so far.
    pub ledger: PrivacyLedger,
    /// Model parameters in the model's order.
    pub params: Vec<HostMatrix>,
    /// Optimiser state.
    pub optimizer: OptimizerState,
    /// Lot sampler (including its random stream).
    pub sampler: LotSampler,
    /// Noise stream position.
    pub noise: ChaChaState,
    /// The optimized mechanism's average of released gradients (its noise allocation's state).
    #[serde(default)]
    pub released: Option<Vec<HostMatrix>>,
    /// Training seconds so far.
    pub seconds: f64,
}

fn err(path: &Path, reason: impl ToString) -> EngineError {
    EngineError::Checkpoint { path: path.to_path_buf(), reason: reason.to_string() }
}

/// Writes `bytes` to `path` atomically: a crash leaves either the old file or the new one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    };
    write().map_err(|e| err(path, e))
}

impl Checkpoint {
    /// Saves atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        let bytes = serde_json::to_vec(self).map_err(|e| err(path, e))?;
        write_atomic(path, &bytes)
    }

    /// Loads and checks the version.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = fs::read(path).map_err(|e| err(path, e))?;
        let c: Checkpoint = serde_json::from_slice(&bytes).map_err(|e| err(path, format!("corrupt: {e}")))?;
        if c.version != CHECKPOINT_VERSION {
            return Err(err(path, format!("version {} (this dptrain reads {CHECKPOINT_VERSION})", c.version)));
        }
        if c.step > c.planned_steps || c.ledger.total_steps() > c.step {
            return Err(err(path, "inconsistent step counts"));
        }
        Ok(c)
    }
}
