//! What a run plans before its first step, from its configuration and the number of training
//! examples alone: the steps, the noise multiplier (given, or calibrated to the target epsilon),
//! the privacy of the whole planned run (refused when over budget), its caveats, and the lot
//! sampler it starts with. The library's [`crate::engine::builder::PrivacyEngine`] and the CLI's
//! trainer (through it) set a run up from these pieces.

use crate::clipping::Clipping;
use crate::error::{EngineError, Result};
use crate::privacy::accounting::sigma_privacy;
use crate::privacy::config::PrivacyConfig;
use dp_accounting::search::TrainingShape;
use dp_accounting::{LotSampling, PrivacyLedger, PrivacyReport};
use dp_data::{ChaChaState, LotSampler, Sampling};

/// What a run plans, from its configuration and training-set size alone.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Training examples N.
    pub n: usize,
    /// Sampling rate q = L / N.
    pub sample_rate: f64,
    /// Steps of the whole run.
    pub planned_steps: u64,
    /// Noise multiplier (None for the baseline).
    pub z: Option<f64>,
    /// Clipping used.
    pub clipping: Clipping,
    /// The privacy of the whole planned run.
    pub privacy: PrivacyReport,
    /// Beside a paper's claim, the accountant's readout of the planned run (optimized-paper: the
    /// epsilon of its smallest sigma).
    pub sigma_privacy: Option<PrivacyReport>,
}

/// Steps, noise multiplier and planned privacy of a run on `n` examples; refused when the
/// planned run would spend more than its target epsilon.
pub fn plan(config: &PrivacyConfig, n: usize) -> Result<Plan> {
    let (mechanism, settings) = (config.mechanism.as_ref(), &config.settings);
    let TrainingShape { sample_rate, steps: planned_steps } = settings.training_shape(n)?;
    let z = mechanism.noise_multiplier(settings, sample_rate, planned_steps)?;
    let mut ledger = PrivacyLedger::new();
    ledger.record_event(mechanism.step_event(z, sample_rate, settings.sampling)?, planned_steps)?;
    let privacy = mechanism.privacy(settings, &ledger, planned_steps)?;
    if let Some(target) = settings.target_epsilon().filter(|_| mechanism.is_private())
        && privacy.epsilon > target * (1.0 + 1e-9)
    {
        return Err(EngineError::privacy(format!(
            "the planned run would spend epsilon {}, above the budget {target}",
            privacy.epsilon
        )));
    }
    let sigma_privacy = sigma_privacy(settings, &ledger, privacy.guarantee)?;
    Ok(Plan { n, sample_rate, planned_steps, z, clipping: config.clipping(), privacy, sigma_privacy })
}

/// The caveats of a run: its mechanism's, then those of its sampling and seed.
pub fn notes(config: &PrivacyConfig) -> Vec<String> {
    let mut notes = config.mechanism.notes();
    if config.mechanism.is_private() {
        if config.settings.sampling == LotSampling::Shuffled {
            notes.push(
                "shuffled lots are not Poisson sampling: the epsilon is what Poisson sampling would give, not a guarantee (label none)".into(),
            );
        }
        if config.settings.seed.is_some() {
            notes.push("reproducible run: sampling and noise derive from the seed, so the guarantee holds only while the seed stays secret".into());
        }
    }
    notes
}

/// How the lots of a run are drawn.
pub fn sampling(config: &PrivacyConfig, plan: &Plan) -> Sampling {
    match config.settings.sampling {
        LotSampling::Poisson => Sampling::Poisson { rate: plan.sample_rate },
        LotSampling::Shuffled => Sampling::Shuffled { lot_size: config.settings.lot_size },
    }
}

/// The lot sampler a fresh run starts with, drawing from `rng`.
pub fn fresh_sampler(config: &PrivacyConfig, plan: &Plan, rng: ChaChaState) -> Result<LotSampler> {
    LotSampler::with_stream(sampling(config, plan), plan.n, rng).map_err(EngineError::from)
}
