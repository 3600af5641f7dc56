//! `--mechanism none`: the unperturbed baseline. No clipping, no noise and no privacy; the step
//! is ordinary Burn training (`step::plain`), so that time ratios are against what a user would
//! run without DP.

use super::registered::Registered;
use super::{Mechanism, MechanismName};
use crate::error::Result;
use crate::privacy::settings::PrivacySettings;
use dp_accounting::{DpEvent, LotSampling};
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

    /// The lot's gradient, unperturbed: epsilon infinite, which no accountant supports.
    fn step_event(&self, _z: Option<f64>, _sample_rate: f64, _sampling: LotSampling) -> Result<DpEvent> {
        Ok(DpEvent::NonPrivate { what: "the lot's gradient, unperturbed".into() })
    }

    fn notes(&self) -> Vec<String> {
        vec!["mechanism none: no clipping and no noise, so no privacy at all".into()]
    }
}
