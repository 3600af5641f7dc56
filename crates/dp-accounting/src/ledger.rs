//! The privacy ledger: every Gaussian step a run has taken, serializable so checkpoints keep it.

use crate::error::Result;
use crate::validate;
use serde::{Deserialize, Serialize};

/// `steps` applications of the Poisson-subsampled Gaussian mechanism with one noise multiplier and
/// one sampling rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GaussianSteps {
    /// Noise standard deviation divided by the L2 sensitivity (clipping norm).
    pub noise_multiplier: f64,
    /// Poisson sampling rate q in (0, 1]; 1 means full batch.
    pub sample_rate: f64,
    /// How many steps used these parameters.
    pub steps: u64,
}

impl GaussianSteps {
    /// A validated entry.
    pub fn new(noise_multiplier: f64, sample_rate: f64, steps: u64) -> Result<Self> {
        Ok(Self {
            noise_multiplier: validate::noise_multiplier(noise_multiplier)?,
            sample_rate: validate::sample_rate(sample_rate)?,
            steps: validate::steps(steps)?,
        })
    }

    fn same_mechanism(&self, other: &Self) -> bool {
        self.noise_multiplier == other.noise_multiplier && self.sample_rate == other.sample_rate
    }
}

/// An ordered record of heterogeneous steps. Composition is commutative, so accountants may group
/// equal mechanisms; the order is kept for the run's own audit trail.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "LedgerOnDisk", into = "LedgerOnDisk")]
pub struct PrivacyLedger {
    entries: Vec<GaussianSteps>,
}

/// The serialized form; loading re-validates every entry so a corrupted checkpoint cannot
/// smuggle in an invalid step.
#[derive(Serialize, Deserialize)]
struct LedgerOnDisk {
    entries: Vec<GaussianSteps>,
}

impl TryFrom<LedgerOnDisk> for PrivacyLedger {
    type Error = crate::AccountingError;
    fn try_from(raw: LedgerOnDisk) -> Result<Self> {
        let mut ledger = PrivacyLedger::new();
        for e in raw.entries {
            ledger.record(e.noise_multiplier, e.sample_rate, e.steps)?;
        }
        Ok(ledger)
    }
}

impl From<PrivacyLedger> for LedgerOnDisk {
    fn from(l: PrivacyLedger) -> Self {
        LedgerOnDisk { entries: l.entries }
    }
}

impl PrivacyLedger {
    /// An empty ledger (no privacy spent).
    pub fn new() -> Self {
        Self::default()
    }

    /// A ledger holding one homogeneous run.
    pub fn homogeneous(noise_multiplier: f64, sample_rate: f64, steps: u64) -> Result<Self> {
        let mut l = Self::new();
        l.record(noise_multiplier, sample_rate, steps)?;
        Ok(l)
    }

    /// Records `steps` more steps; consecutive steps of the same mechanism share one entry.
    pub fn record(&mut self, noise_multiplier: f64, sample_rate: f64, steps: u64) -> Result<()> {
        let entry = GaussianSteps::new(noise_multiplier, sample_rate, steps)?;
        match self.entries.last_mut() {
            Some(last) if last.same_mechanism(&entry) => last.steps += entry.steps,
            _ => self.entries.push(entry),
        }
        Ok(())
    }

    /// The entries in the order they were recorded.
    pub fn entries(&self) -> &[GaussianSteps] {
        &self.entries
    }

    /// Total number of steps recorded.
    pub fn total_steps(&self) -> u64 {
        self.entries.iter().map(|e| e.steps).sum()
    }

    /// True when no step has been recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// One entry per distinct mechanism with the steps added up (composition commutes).
    pub fn grouped(&self) -> Vec<GaussianSteps> {
        let mut groups: Vec<GaussianSteps> = Vec::new();
        for e in &self.entries {
            match groups.iter_mut().find(|g| g.same_mechanism(e)) {
                Some(g) => g.steps += e.steps,
                None => groups.push(*e),
            }
        }
        groups
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
        let g = l.grouped();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].steps, 16);
    }

    #[test]
    fn serde_roundtrip_and_validation_on_load() {
        let l = PrivacyLedger::homogeneous(1.1, 0.004, 100).unwrap();
        let json = serde_json::to_string(&l).unwrap();
        let back: PrivacyLedger = serde_json::from_str(&json).unwrap();
        assert_eq!(l, back);
        let bad = r#"{"entries":[{"noise_multiplier":1.0,"sample_rate":1.5,"steps":3}]}"#;
        let err = serde_json::from_str::<PrivacyLedger>(bad).unwrap_err().to_string();
        assert!(err.contains("sample rate"), "{err}");
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
