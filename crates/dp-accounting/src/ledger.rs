//! The privacy ledger: every release of a run as an event that says what happened (apart from
//! how it is accounted), in order, with consecutive equal releases counted together;
//! serializable so checkpoints keep it.

use crate::error::Result;
use crate::event::{DpEvent, GaussianSteps, LotSampling};
use serde::{Deserialize, Serialize};

/// An ordered record of a run's releases. Composition is commutative, so accountants may group
/// equal mechanisms; the order is kept for the run's own audit trail.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "LedgerOnDisk", into = "LedgerOnDisk")]
pub struct PrivacyLedger {
    /// (how many times, what) in the order they happened.
    entries: Vec<(u64, DpEvent)>,
}

/// One entry as it is serialized.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryOnDisk {
    count: u64,
    event: DpEvent,
}

/// The serialized form; loading re-validates every event so a corrupted checkpoint cannot
/// smuggle in an invalid release.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LedgerOnDisk {
    entries: Vec<EntryOnDisk>,
}

impl TryFrom<LedgerOnDisk> for PrivacyLedger {
    type Error = crate::AccountingError;
    fn try_from(raw: LedgerOnDisk) -> Result<Self> {
        let mut ledger = PrivacyLedger::new();
        for e in raw.entries {
            ledger.record_event(e.event, e.count)?;
        }
        Ok(ledger)
    }
}

impl From<PrivacyLedger> for LedgerOnDisk {
    fn from(l: PrivacyLedger) -> Self {
        LedgerOnDisk { entries: l.entries.into_iter().map(|(count, event)| EntryOnDisk { count, event }).collect() }
    }
}

impl PrivacyLedger {
    /// An empty ledger (no privacy spent).
    pub fn new() -> Self {
        Self::default()
    }

    /// A ledger holding one homogeneous run of Poisson-sampled Gaussian steps.
    pub fn homogeneous(noise_multiplier: f64, sample_rate: f64, steps: u64) -> Result<Self> {
        let mut l = Self::new();
        l.record(noise_multiplier, sample_rate, steps)?;
        Ok(l)
    }

    /// Records `steps` more Poisson-sampled Gaussian steps.
    pub fn record(&mut self, noise_multiplier: f64, sample_rate: f64, steps: u64) -> Result<()> {
        self.record_event(DpEvent::sampled_gaussian(noise_multiplier, sample_rate, LotSampling::Poisson)?, steps)
    }

    /// Records `event`, `count` times, after validating both; it shares an entry with the last
    /// one when they are the same release.
    pub fn record_event(&mut self, event: DpEvent, count: u64) -> Result<()> {
        event.validate()?;
        crate::validate::steps(count)?;
        match self.entries.last_mut() {
            Some((n, last)) if *last == event => *n = n.saturating_add(count),
            _ => self.entries.push((count, event)),
        }
        Ok(())
    }

    /// The whole run as one event: its entries, composed in order.
    pub fn event(&self) -> DpEvent {
        DpEvent::Composed {
            events: self
                .entries
                .iter()
                .map(|(count, e)| DpEvent::SelfComposed { count: *count, of: Box::new(e.clone()) })
                .collect(),
        }
    }

    /// The entries, (how many times, what), in the order they were recorded.
    pub fn entries(&self) -> &[(u64, DpEvent)] {
        &self.entries
    }

    /// Total number of releases recorded (steps, for a training run).
    pub fn total_steps(&self) -> u64 {
        self.entries.iter().map(|(n, _)| n).sum()
    }

    /// True when nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The Gaussian releases, one entry per distinct mechanism with the steps added up.
    pub fn grouped(&self) -> Result<Vec<GaussianSteps>> {
        self.event().gaussian_steps()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_and_groups() {
        let mut l = PrivacyLedger::new();
        l.record(1.0, 0.01, 10).unwrap();
        l.record(1.0, 0.01, 5).unwrap();
        l.record(2.0, 0.01, 3).unwrap();
        l.record(1.0, 0.01, 1).unwrap();
        assert_eq!(l.entries().len(), 3);
        assert_eq!(l.total_steps(), 19);
        let g = l.grouped().unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].steps, 16);
    }

    #[test]
    fn serde_roundtrip_and_validation_on_load() {
        let l = PrivacyLedger::homogeneous(1.1, 0.004, 100).unwrap();
        let json = serde_json::to_string(&l).unwrap();
        let back: PrivacyLedger = serde_json::from_str(&json).unwrap();
        assert_eq!(l, back);
        let bad = json.replace("0.004", "1.5");
        let err = serde_json::from_str::<PrivacyLedger>(&bad).unwrap_err().to_string();
        assert!(err.contains("sample rate"), "{err}");
        let zero = json.replace("\"count\":100", "\"count\":0");
        assert!(serde_json::from_str::<PrivacyLedger>(&zero).is_err(), "{zero}");
    }

    #[test]
    fn a_shuffled_step_takes_the_certificate_away() {
        let mut l = PrivacyLedger::homogeneous(1.0, 0.01, 10).unwrap();
        let rdp = crate::RdpAccountant::default();
        let certified = crate::Accountant::epsilon(&rdp, &l, 1e-5).unwrap();
        assert_eq!(certified.guarantee, crate::Guarantee::Certified);
        l.record_event(DpEvent::sampled_gaussian(1.0, 0.01, LotSampling::Shuffled).unwrap(), 1).unwrap();
        assert_eq!(l.entries().len(), 2, "a shuffled step is another release");
        let r = crate::Accountant::epsilon(&rdp, &l, 1e-5).unwrap();
        assert_eq!(r.guarantee, crate::Guarantee::None);
        assert!(r.epsilon > certified.epsilon);
    }

    #[test]
    fn rejects_invalid_steps() {
        let mut l = PrivacyLedger::new();
        assert!(l.record(0.0, 0.1, 1).is_err());
        assert!(l.record(1.0, 0.0, 1).is_err());
        assert!(l.record(1.0, 0.1, 0).is_err());
        assert!(l.is_empty());
    }
}
