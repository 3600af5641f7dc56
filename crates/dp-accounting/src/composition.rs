//! Basic composition of (epsilon, delta) releases (Dwork and Roth 2014, Theorem 3.16): the
//! epsilons and deltas add up. It covers the releases a published theorem proves (objective
//! perturbation); a paper's own bound it adds up too, labelled paper-bound, since the sum is only
//! as good as its parts. A release of one of them reports the theorem or paper as its source.

use crate::accountant::Accountant;
use crate::error::{AccountingError, Result};
use crate::event::DpEvent;
use crate::ledger::PrivacyLedger;
use crate::report::PrivacyReport;
use crate::validate;

/// The basic composition theorem over (epsilon, delta) releases.
#[derive(Debug, Clone, Copy, Default)]
pub struct BasicComposition;

impl BasicComposition {
    /// The labelled epsilon of one release `event` at `delta`.
    pub fn of(event: DpEvent, delta: f64) -> Result<PrivacyReport> {
        let mut ledger = PrivacyLedger::new();
        ledger.record_event(event, 1)?;
        BasicComposition.epsilon(&ledger, delta)
    }
}

impl Accountant for BasicComposition {
    fn name(&self) -> &'static str {
        "basic-composition"
    }

    fn supports(&self, event: &DpEvent) -> bool {
        event.parts().iter().all(|(_, part)| matches!(part, DpEvent::Proven { .. }))
    }

    fn epsilon(&self, ledger: &PrivacyLedger, delta: f64) -> Result<PrivacyReport> {
        let delta = validate::delta(delta)?;
        let event = ledger.event();
        let (mut epsilon, mut spent, mut sources) = (0.0, 0.0, Vec::new());
        for (times, part) in event.parts() {
            let (source, e, d) = match part {
                DpEvent::Proven { theorem, epsilon, delta } => (theorem.as_str(), *epsilon, *delta),
                DpEvent::PaperBound { paper, epsilon, delta } => (paper.as_str(), *epsilon, *delta),
                DpEvent::NonPrivate { .. } => ("", f64::INFINITY, 0.0),
                other => {
                    return Err(AccountingError::Unsupported(format!(
                        "basic composition takes (epsilon, delta) releases, not {}",
                        other.kind()
                    )));
                }
            };
            epsilon += e * times as f64;
            spent += d * times as f64;
            sources.push(source);
        }
        if spent > delta * (1.0 + 1e-12) {
            return Err(AccountingError::InvalidParameter {
                name: "delta",
                value: delta.to_string(),
                requirement: "must be at least the sum of the releases' deltas",
            });
        }
        let name = match sources.as_slice() {
            [one] if !one.is_empty() => one,
            _ => self.name(),
        };
        Ok(PrivacyReport::new(epsilon, delta, name, self.guarantee(&event)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Guarantee;

    #[test]
    fn a_theorem_is_certified_a_paper_bound_is_not() {
        let proven = DpEvent::Proven { theorem: "kifer2012".into(), epsilon: 1.0, delta: 1e-6 };
        let r = BasicComposition::of(proven.clone(), 1e-5).unwrap();
        assert_eq!((r.epsilon, r.guarantee, r.accountant.as_str()), (1.0, Guarantee::Certified, "kifer2012"));
        let paper = DpEvent::PaperBound { paper: "p".into(), epsilon: 0.5, delta: 1e-6 };
        let mut l = PrivacyLedger::new();
        l.record_event(proven, 2).unwrap();
        l.record_event(paper, 1).unwrap();
        let r = BasicComposition.epsilon(&l, 1e-5).unwrap();
        assert_eq!((r.epsilon, r.guarantee, r.accountant.as_str()), (2.5, Guarantee::PaperBound, "basic-composition"));
        assert!(BasicComposition.epsilon(&l, 2e-6).is_err(), "three releases at 1e-6 spend 3e-6");
    }

    #[test]
    fn refuses_a_gaussian_release() {
        let l = PrivacyLedger::homogeneous(1.0, 0.1, 3).unwrap();
        assert!(BasicComposition.epsilon(&l, 1e-5).is_err());
    }
}
