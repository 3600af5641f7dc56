//! What a run's epsilon is: the epsilon the run's accountant gives for its ledger of events,
//! labelled by what that accountant supports (certified only when its proof covers every release:
//! Poisson-sampled Gaussian steps), and the noise multiplier a run uses (given, or calibrated to
//! a budget).

use crate::error::{EngineError, Result};
use crate::privacy::settings::{AccountantChoice, NoiseLevel, PrivacySettings};
use dp_accounting::{
    Accountant, AccountantOptions, Guarantee, PrivacyLedger, PrivacyReport, calibrate_noise_multiplier,
};
use std::sync::Arc;

/// The accountant a run chose: a built-in one by name, or the user's own.
pub fn accountant(choice: &AccountantChoice) -> Arc<dyn Accountant> {
    match choice {
        AccountantChoice::Named(name) => name.build(&AccountantOptions::default()),
        AccountantChoice::Own(accountant) => accountant.clone(),
    }
}

/// What the run's accountant gives for `ledger` at the run's delta, with the label its support
/// of the ledger's events earns.
pub fn accounted(config: &PrivacySettings, ledger: &PrivacyLedger) -> Result<PrivacyReport> {
    Ok(accountant(&config.accountant).epsilon(ledger, config.delta)?)
}

/// Beside a report that is a paper's claim (`claimed`), the run's accountant's epsilon of the same
/// ledger, labelled as the accountant supports its events (optimized-paper: the Gaussian releases
/// at its smallest sigma, label none since w is unaccounted); None beside a report the accountant
/// gave.
pub fn sigma_privacy(
    config: &PrivacySettings,
    ledger: &PrivacyLedger,
    claimed: Guarantee,
) -> Result<Option<PrivacyReport>> {
    if claimed != Guarantee::PaperBound {
        return Ok(None);
    }
    accounted(config, ledger).map(Some)
}

/// The noise multiplier of a run: the one given, or the smallest that keeps `steps` steps at
/// sampling rate `sample_rate` within the target epsilon.
pub fn given_or_calibrated(config: &PrivacySettings, sample_rate: f64, steps: u64) -> Result<f64> {
    match config.noise {
        Some(NoiseLevel::Multiplier(z)) => Ok(z),
        Some(NoiseLevel::TargetEpsilon(target)) => {
            let acc = accountant(&config.accountant);
            calibrate_noise_multiplier(acc.as_ref(), target, config.delta, sample_rate, steps)
                .map(|c| c.noise_multiplier)
                .map_err(EngineError::from)
        }
        None => Err(EngineError::invalid("privacy", "no noise multiplier or target epsilon")),
    }
}
