//! The final report of a run's session, written to its folder's report.json.

use crate::provenance::Provenance;
use dp_accounting::{PrivacyLedger, PrivacyReport};
use dp_engine::backend::Trial;
use dp_engine::step::canaries::RunAudit;
use serde::Serialize;
use std::path::PathBuf;

/// The final report of a run (also written to report.json).
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Accuracy of the final model on the set it is evaluated on.
    pub test_accuracy: f64,
    /// That set's name (`test`, `validation`: [`crate::Run::describe`]).
    pub evaluated_on: String,
    /// Epsilon spent (infinite for the baseline, null in JSON), its delta, accountant and
    /// label.
    #[serde(flatten)]
    pub privacy: PrivacyReport,
    /// optimized-paper: the epsilon of the Gaussian mechanism with the smallest sigma used
    /// (label none: w came from the private data).
    pub sigma_privacy: Option<PrivacyReport>,
    /// Steps taken.
    pub steps: u64,
    /// Wall-clock training seconds (over all resumed segments).
    pub seconds: f64,
    /// Noise multiplier used.
    pub noise_multiplier: Option<f64>,
    /// Sampling rate q.
    pub sample_rate: f64,
    /// Device.
    pub device: String,
    /// How `auto` chose it: each device tried, and why it was taken or passed over (empty for a
    /// device named).
    pub device_tried: Vec<Trial>,
    /// Model ([`crate::Run::describe`]).
    pub model: String,
    /// Mechanism.
    pub mechanism: String,
    /// The parameters trained, by path (what each step released noisy).
    pub trained_parameters: Vec<String>,
    /// The parameters kept frozen (`PrivacyConfig::with_frozen`), released by no step.
    pub frozen_parameters: Vec<String>,
    /// True when the run was seeded (reproducible).
    pub seeded: bool,
    /// Caveats.
    pub notes: Vec<String>,
    /// The run folder.
    pub run_dir: PathBuf,
    /// Its plot of test accuracy and training loss against steps and epsilon.
    pub curves: PathBuf,
    /// False when this session stopped before the planned steps (resume to continue).
    pub completed: bool,
    /// True when an interruption (Ctrl-C, SIGTERM) stopped this session early.
    pub interrupted: bool,
    /// The one-run audit, when one was asked for.
    pub audit: Option<RunAudit>,
    /// Where the initial weights came from (their digest, and their report where it verifies):
    /// what this run's epsilon does not count.
    pub initial_weights: Option<Provenance>,
    /// The releases the engine recorded while it released noise: what the epsilon above is
    /// computed from. Private, so a report is made by a run and not restated (a search checks
    /// a candidate's against what it accounted).
    pub(crate) ledger: PrivacyLedger,
}

impl RunReport {
    /// The releases the engine recorded while this run released noise.
    pub fn ledger(&self) -> &PrivacyLedger {
        &self.ledger
    }

    /// A report of a run that recorded `ledger` (the search's unit tests, which train nothing).
    #[cfg(test)]
    pub(crate) fn recorded(ledger: PrivacyLedger) -> Self {
        RunReport {
            test_accuracy: 0.0,
            evaluated_on: String::new(),
            privacy: PrivacyReport::new(f64::INFINITY, 1e-5, "rdp", dp_accounting::Guarantee::None),
            sigma_privacy: None,
            steps: ledger.total_steps(),
            seconds: 0.0,
            noise_multiplier: None,
            sample_rate: 0.0,
            device: String::new(),
            device_tried: Vec::new(),
            model: String::new(),
            mechanism: String::new(),
            trained_parameters: Vec::new(),
            frozen_parameters: Vec::new(),
            seeded: false,
            notes: Vec::new(),
            run_dir: PathBuf::new(),
            curves: PathBuf::new(),
            completed: true,
            interrupted: false,
            audit: None,
            initial_weights: None,
            ledger,
        }
    }
}
