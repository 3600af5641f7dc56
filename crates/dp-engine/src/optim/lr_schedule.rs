//! The learning rate of each step: constant, or a cosine decay to zero over the run (Loshchilov
//! and Hutter 2017). A closed form of the step number, so a resumed run continues the schedule
//! where it stopped. The rate only post-processes the released gradients: no schedule changes
//! the privacy.

use serde::{Deserialize, Serialize};
use std::f64::consts::PI;

/// How the learning rate moves over a run's steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LrSchedule {
    /// The base rate at every step.
    #[default]
    Constant,
    /// base * (1 + cos(pi t / T)) / 2 at step t of T: the base rate first, near zero last.
    Cosine,
}

impl LrSchedule {
    /// The rate of step `step` (0 for the first) of a run of `steps`, from the `base` rate.
    pub fn rate(self, base: f64, step: u64, steps: u64) -> f64 {
        match self {
            LrSchedule::Constant => base,
            LrSchedule::Cosine => {
                let progress = step.min(steps) as f64 / steps.max(1) as f64;
                base * (1.0 + (PI * progress).cos()) / 2.0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_starts_at_the_base_halves_midway_and_ends_at_zero() {
        let s = LrSchedule::Cosine;
        assert_eq!(s.rate(2.0, 0, 100), 2.0);
        assert!((s.rate(2.0, 50, 100) - 1.0).abs() < 1e-12);
        assert!((s.rate(2.0, 25, 100) - (1.0 + 0.5f64.sqrt())).abs() < 1e-12);
        assert!(s.rate(2.0, 100, 100).abs() < 1e-12);
        assert!(s.rate(2.0, 500, 100).abs() < 1e-12, "beyond the plan the rate stays at zero");
        assert_eq!(LrSchedule::Constant.rate(2.0, 99, 100), 2.0);
    }
}
