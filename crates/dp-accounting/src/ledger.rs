//! The privacy ledger: every Gaussian step a run has taken, with how its lot was sampled (what
//! happened, apart from how it is accounted), serializable so checkpoints keep it.

use crate::error::Result;
use crate::report::Guarantee;
use crate::validate;
use serde::{Deserialize, Serialize};

/// How the examples of a step's lot were chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LotSampling {
    /// Each example independently with probability q: what the accountants' proofs assume.
    Poisson,
    /// Fixed-size lots from shuffled passes: no accountant here covers it, so an epsilon
    /// computed as if it were Poisson carries no guarantee.
    Shuffled,
}

/// `steps` applications of the subsampled Gaussian mechanism with one noise multiplier, one
/// sampling rate and one way of sampling.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GaussianSteps {
    /// Noise standard deviation divided by the L2 sensitivity (clipping norm).
    pub noise_multiplier: f64,
    /// Sampling rate q in (0, 1]; 1 means full batch.
    pub sample_rate: f64,
    /// How many steps used these parameters.
    pub steps: u64,
    /// How the lots were drawn.
    pub sampling: LotSampling,
}

impl GaussianSteps {
    /// A validated entry of Poisson-sampled steps.
    pub fn new(noise_multiplier: f64, sample_rate: f64, steps: u64) -> Result<Self> {
        Self::sampled(noise_multiplier, sample_rate, steps, LotSampling::Poisson)
    }

    /// A validated entry of steps whose lots were drawn by `sampling`.
    pub fn sampled(noise_multiplier: f64, sample_rate: f64, steps: u64, sampling: LotSampling) -> Result<Self> {
        Ok(Self {
            noise_multiplier: validate::noise_multiplier(noise_multiplier)?,
            sample_rate: validate::sample_rate(sample_rate)?,
            steps: validate::steps(steps)?,
            sampling,
        })
    }

    fn same_mechanism(&self, other: &Self) -> bool {
        self.noise_multiplier == other.noise_multiplier
            && self.sample_rate == other.sample_rate
            && self.sampling == other.sampling
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
            ledger.record_entry(GaussianSteps::sampled(e.noise_multiplier, e.sample_rate, e.steps, e.sampling)?);
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

    /// Records `steps` more Poisson-sampled steps.
    pub fn record(&mut self, noise_multiplier: f64, sample_rate: f64, steps: u64) -> Result<()> {
        self.record_entry(GaussianSteps::new(noise_multiplier, sample_rate, steps)?);
        Ok(())
    }

    /// Records an entry; consecutive steps of the same mechanism share one entry.
    pub fn record_entry(&mut self, entry: GaussianSteps) {
        match self.entries.last_mut() {
            Some(last) if last.same_mechanism(&entry) => last.steps += entry.steps,
            _ => self.entries.push(entry),
        }
    }

    /// The label a sound accountant's epsilon for this ledger earns: certified when every lot
    /// was Poisson-sampled, none when some were not (the proofs assume Poisson sampling).
    pub fn guarantee(&self) -> Guarantee {
        if self.entries.iter().all(|e| e.sampling == LotSampling::Poisson) {
            Guarantee::Certified
        } else {
            Guarantee::None
        }
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
        let bad = r#"{"entries":[{"noise_multiplier":1.0,"sample_rate":1.5,"steps":3,"sampling":"poisson"}]}"#;
        let err = serde_json::from_str::<PrivacyLedger>(bad).unwrap_err().to_string();
        assert!(err.contains("sample rate"), "{err}");
    }

    #[test]
    fn a_shuffled_step_takes_the_certificate_away() {
        let mut l = PrivacyLedger::homogeneous(1.0, 0.01, 10).unwrap();
        assert_eq!(l.guarantee(), Guarantee::Certified);
        l.record_entry(GaussianSteps::sampled(1.0, 0.01, 1, LotSampling::Shuffled).unwrap());
        assert_eq!(l.entries().len(), 2, "a shuffled step is another mechanism");
        assert_eq!(l.guarantee(), Guarantee::None);
        let report = crate::RdpAccountant::default();
        let r = crate::Accountant::epsilon(&report, &l, 1e-5).unwrap();
        assert_eq!(r.guarantee, Guarantee::None);
        assert!(r.epsilon > 0.0);
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
