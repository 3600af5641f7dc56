//! The common face of every sound accountant: a ledger and a delta in, a labelled epsilon out.

use crate::error::Result;
use crate::ledger::PrivacyLedger;
use crate::report::PrivacyReport;

/// A sound accountant for the Poisson-subsampled Gaussian mechanism under add/remove adjacency.
pub trait Accountant: Send + Sync {
    /// Short name printed in reports (`rdp`, `prv`, `analytic`).
    fn name(&self) -> &'static str;

    /// The smallest epsilon this accountant can certify for `ledger` at `delta`.
    fn epsilon(&self, ledger: &PrivacyLedger, delta: f64) -> Result<PrivacyReport>;
}
