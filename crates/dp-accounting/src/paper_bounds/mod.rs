//! The papers' own privacy formulas, implemented as printed (constants explicit) so the engine can
//! show what each paper claims. Every claim built from them carries the `paper-bound` label: the
//! proofs contain heuristic steps or unspecified constants; a release analysed by one is recorded
//! as a `DpEvent::PaperBound` (docs/MECHANISMS.md, "Mechanisms and
//! what a run may claim").

pub mod dbdp;
pub mod input_perturbation;
pub mod lssgd;
pub mod xiang2019;
