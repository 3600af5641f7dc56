//! How a run's session goes: where it stops, what it checkpoints, what it adds to the plain
//! DP loop (parameter averaging, an audit), and whether it may replace another run's files.

use dp_engine::error::{EngineError, Result};
use dp_engine::step::canaries::AuditRequest;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The options of a run's session (by default: the whole run, checkpointed every
/// [`CHECKPOINT_EVERY`] steps, every [`CHECKPOINT_INTERVAL`] of training and at the end, nothing
/// added).
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// Take at most this many steps now, then checkpoint and return (resume later).
    pub stop_after: Option<u64>,
    /// Also checkpoint every this many steps (0: only at the end of the session).
    pub checkpoint_every: u64,
    /// Also checkpoint once this much training time has passed since the last checkpoint (None:
    /// by steps alone), so that a run killed loses at most this much, however short its plan.
    pub checkpoint_interval: Option<Duration>,
    /// Evaluate (and release) an exponential moving average of the parameters with this decay.
    pub average: Option<f64>,
    /// Audit the run with white-box canaries (a whole run in one session only).
    pub audit: Option<AuditRequest>,
    /// Start a fresh run in a folder that holds another run's files, replacing them.
    pub overwrite: bool,
    /// Raised (by a signal handler: `crate::interrupt`) to stop after the current step with a
    /// checkpoint.
    pub interrupt: Option<&'static AtomicBool>,
    /// Keep the run's key file when it completes (it is removed otherwise).
    pub keep_key: bool,
}

/// Steps between checkpoints unless told otherwise: a run killed loses at most this many.
pub const CHECKPOINT_EVERY: u64 = 200;
/// Training time between checkpoints unless told otherwise: a run killed loses at most this much.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(60);

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            stop_after: None,
            checkpoint_every: CHECKPOINT_EVERY,
            checkpoint_interval: Some(CHECKPOINT_INTERVAL),
            average: None,
            audit: None,
            overwrite: false,
            interrupt: None,
            keep_key: false,
        }
    }
}

impl RunOptions {
    /// Refuses options that cannot go together (`resumed`: the session continues a run).
    pub(crate) fn check(&self, resumed: bool) -> Result<()> {
        if self.stop_after == Some(0) {
            return Err(EngineError::invalid("stop after", "0 steps would leave nothing to resume: give at least 1"));
        }
        if let Some(request) = self.audit {
            if resumed || self.stop_after.is_some() {
                return Err(EngineError::invalid(
                    "audit",
                    "the canaries live in memory: audit a whole run in one session (no RunFolder::resume or RunOptions::stop_after)",
                ));
            }
            if !(request.confidence > 0.0 && request.confidence < 1.0) {
                return Err(EngineError::invalid(
                    "audit confidence",
                    format!("{} is not in (0, 1)", request.confidence),
                ));
            }
        }
        Ok(())
    }
}
