//! The common face of every accountant: which releases its proof covers, and a ledger and a
//! delta in, a labelled epsilon out. The label follows from what the accountant supports, never
//! from the caller.

use crate::error::Result;
use crate::event::DpEvent;
use crate::ledger::PrivacyLedger;
use crate::report::{Guarantee, PrivacyReport};

/// An accountant: a method with a proof for some kinds of release.
pub trait Accountant: Send + Sync {
    /// Short name printed in reports (`rdp`, `prv`, `analytic`, `composition`).
    fn name(&self) -> &'static str;

    /// True when the accountant's proof covers every release of `event`.
    fn supports(&self, event: &DpEvent) -> bool;

    /// The smallest epsilon this accountant gives for `ledger` at `delta`, labelled by
    /// [`Accountant::guarantee`].
    fn epsilon(&self, ledger: &PrivacyLedger, delta: f64) -> Result<PrivacyReport>;

    /// The label an epsilon of this accountant for `event` earns: certified when it supports
    /// the whole event; paper-bound when each release it does not support is analysed by its
    /// paper's own bound; none otherwise (the number is shown only for comparison).
    fn guarantee(&self, event: &DpEvent) -> Guarantee {
        if self.supports(event) {
            return Guarantee::Certified;
        }
        let paper_or_supported =
            |(_, part): &(u64, &DpEvent)| matches!(part, DpEvent::PaperBound { .. }) || self.supports(part);
        if event.parts().iter().all(paper_or_supported) { Guarantee::PaperBound } else { Guarantee::None }
    }
}

/// True when every part of `event` is a Gaussian release on a Poisson-sampled lot (a BandMF
/// step's within its group, of no more bands than groups), or an unsampled one: what the RDP
/// and PRV accountants' proofs cover.
pub fn poisson_gaussian_only(event: &DpEvent) -> bool {
    event.parts().iter().all(|(_, part)| match part {
        DpEvent::Gaussian { .. } => true,
        DpEvent::PoissonSampled { of, .. } => matches!(of.as_ref(), DpEvent::Gaussian { .. }),
        DpEvent::CyclicBanded { bands, groups, of, .. } => {
            bands <= groups && matches!(of.as_ref(), DpEvent::Gaussian { .. })
        }
        _ => false,
    })
}

/// The report of a Gaussian accountant for a ledger with no Gaussian release: zero for nothing
/// or only unaccounted uses (labelled by `accountant`), infinite when something was released
/// without privacy.
pub fn without_gaussian(accountant: &dyn Accountant, ledger: &PrivacyLedger, delta: f64) -> PrivacyReport {
    let event = ledger.event();
    let epsilon = if event.is_non_private() { f64::INFINITY } else { 0.0 };
    PrivacyReport::new(epsilon, delta, accountant.name(), accountant.guarantee(&event))
}
