//! The papers' own privacy formulas, implemented as printed (constants explicit) so the engine can
//! show what each paper claims. Every claim built from them carries the `paper-bound` label: the
//! proofs contain heuristic steps or unspecified constants (docs/ARCHITECTURE.md, "Mechanisms and
//! what a run may claim").

pub mod dbdp;
pub mod input_perturbation;
pub mod lssgd;
pub mod xiang2019;

use crate::report::{Guarantee, PrivacyReport};

/// The claim a paper's algorithm makes for a run configured for (epsilon, delta): labelled
/// `paper-bound`, with the paper named as the accountant.
pub fn claim(paper: &str, epsilon: f64, delta: f64) -> PrivacyReport {
    PrivacyReport::new(epsilon, delta, paper, Guarantee::PaperBound)
}
