//! What a run's epsilon is, with everything needed to read it: the epsilon a sound accountant
//! gives for a ledger, labelled by the ledger itself (certified only when every lot was
//! Poisson-sampled), and the noise multiplier a run uses (given, or calibrated to a budget).

use crate::error::{EngineError, Result};
use crate::privacy_settings::{AccountantName, NoiseLevel, PrivacySettings};
use dp_accounting::{Accountant, Guarantee, PrivacyLedger, PrvAccountant, RdpAccountant, calibrate_noise_multiplier};
use serde::Serialize;
use std::fmt;

/// An epsilon with everything needed to read it.
#[derive(Debug, Clone, Serialize)]
pub struct PrivacySpent {
    /// Epsilon (None: no privacy at all, the unperturbed baseline).
    pub epsilon: Option<f64>,
    /// Delta.
    pub delta: f64,
    /// Accountant that computed it.
    pub accountant: String,
    /// How much to trust it.
    pub guarantee: Guarantee,
}

impl fmt::Display for PrivacySpent {
    /// "epsilon 3.0000 (delta 1e-5, rdp, certified)": never an epsilon without its label.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.epsilon {
            Some(e) => write!(f, "epsilon {e:.4} (delta {:e}, {}, {})", self.delta, self.accountant, self.guarantee),
            None => f.write_str("epsilon infinite (no privacy, label none)"),
        }
    }
}

/// The accountant a run names.
pub fn accountant(name: AccountantName) -> Box<dyn Accountant> {
    match name {
        AccountantName::Rdp => Box::new(RdpAccountant::default()),
        AccountantName::Prv => Box::new(PrvAccountant::default()),
    }
}

/// What the run's accountant gives for `ledger` at the run's delta, with the ledger's label.
pub fn certified(config: &PrivacySettings, ledger: &PrivacyLedger) -> Result<PrivacySpent> {
    let report = accountant(config.accountant).epsilon(ledger, config.delta)?;
    Ok(PrivacySpent {
        epsilon: Some(report.epsilon),
        delta: report.delta,
        accountant: report.accountant,
        guarantee: report.guarantee,
    })
}

/// The noise multiplier of a run: the one given, or the smallest that keeps `steps` steps at
/// sampling rate `sample_rate` within the target epsilon.
pub fn given_or_calibrated(config: &PrivacySettings, sample_rate: f64, steps: u64) -> Result<f64> {
    match config.noise {
        Some(NoiseLevel::Multiplier(z)) => Ok(z),
        Some(NoiseLevel::TargetEpsilon(target)) => {
            let acc = accountant(config.accountant);
            calibrate_noise_multiplier(acc.as_ref(), target, config.delta, sample_rate, steps)
                .map(|c| c.noise_multiplier)
                .map_err(EngineError::from)
        }
        None => Err(EngineError::invalid("privacy", "no noise multiplier or target epsilon")),
    }
}
