//! `--mechanism none`: the unperturbed baseline. No clipping, no noise and no privacy; the step
//! is ordinary Burn training (`step::plain`), so that time ratios are against what a user would
//! run without DP.

use super::registry::Registered;
use super::{Mechanism, MechanismName};
use crate::error::Result;
use crate::privacy::PrivacySpent;
use crate::privacy_settings::PrivacySettings;
use dp_accounting::{Guarantee, PrivacyLedger};
use std::sync::Arc;

/// The registry's entry: no options.
pub(super) const REGISTERED: Registered =
    Registered { name: MechanismName::None, options: &[], build: |_| Ok(Arc::new(Unperturbed)) };

/// The unperturbed baseline.
pub struct Unperturbed;

impl Mechanism for Unperturbed {
    fn name(&self) -> &'static str {
        "none"
    }

    fn is_private(&self) -> bool {
        false
    }

    fn noise_multiplier(&self, _config: &PrivacySettings, _rate: f64, _steps: u64) -> Result<Option<f64>> {
        Ok(None)
    }

    fn privacy(&self, config: &PrivacySettings, _ledger: &PrivacyLedger, _planned: u64) -> Result<PrivacySpent> {
        Ok(PrivacySpent { epsilon: None, delta: config.delta, accountant: "none".into(), guarantee: Guarantee::None })
    }

    fn notes(&self) -> Vec<String> {
        vec!["--mechanism none: no clipping and no noise, so no privacy at all".into()]
    }
}
