//! The classic audit from many runs (Jagielski et al. 2020, Nasr et al. 2021): a test that says
//! "canary in" or "canary out" for each run has false positive rate FPR and false negative rate
//! FNR, and (eps, delta)-DP forces FPR + e^eps FNR >= 1 - delta and FNR + e^eps FPR >= 1 - delta.
//! With Clopper-Pearson upper bounds on both rates (each at half the error budget), the larger
//! of ln((1 - delta - FNR)/FPR) and ln((1 - delta - FPR)/FNR) is a lower bound on eps.

use super::binomial::clopper_pearson_upper;

/// The counts of one threshold test over many runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TestCounts {
    /// Runs without the canary that the test called "in".
    pub false_positives: u64,
    /// Runs without the canary.
    pub negatives: u64,
    /// Runs with the canary that the test called "out".
    pub false_negatives: u64,
    /// Runs with the canary.
    pub positives: u64,
}

/// The epsilon lower bound the counts support at `confidence` (zero when they support none).
pub fn epsilon_lower_bound(counts: TestCounts, delta: f64, confidence: f64) -> f64 {
    let each = 1.0 - (1.0 - confidence) / 2.0;
    let fpr = clopper_pearson_upper(counts.false_positives, counts.negatives, each);
    let fnr = clopper_pearson_upper(counts.false_negatives, counts.positives, each);
    let bound = |a: f64, b: f64| if b > 0.0 && 1.0 - delta - a > 0.0 { ((1.0 - delta - a) / b).ln() } else { 0.0 };
    bound(fnr, fpr).max(bound(fpr, fnr)).max(0.0)
}
