//! Empirical privacy audits of the engine's mechanisms: lower bounds on the epsilon a mechanism
//! really has, from membership guesses on canaries. The one-run audit (Steinke, Nasr and
//! Jagielski, NeurIPS 2023) trains once with m canaries each included with probability 1/2;
//! white-box gradient canaries audit DP-SGD tightly, black-box out-of-distribution rows scored
//! by their loss audit any DP-ERM method. The many-run audit trains repeatedly with and without one canary
//! and bounds the test's error rates with Clopper-Pearson intervals. A lower bound above a
//! method's claimed epsilon refutes the claim (at the stated confidence).

#![warn(missing_docs)]

pub mod audit;
pub mod canaries;
pub mod many_runs;
pub mod plot;

pub use audit::{Audit, AuditReport, CanaryKind, Design};
pub use dp_accounting::audit::guesses::OneRunBound;
pub use many_runs::ManyRunBound;
