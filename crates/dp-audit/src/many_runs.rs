//! The classic many-run audit: the mechanism is trained N times without and N times with one
//! canary; a test "in when the canary's score lies in [lower, upper)" is chosen on the first half
//! of each world's runs (so it does not depend on the runs that are counted) and the bound of
//! `dp_accounting::audit::multi_run` is computed from its errors on the second halves. An
//! interval, not only a threshold: a mechanism that adds rare, huge noise throws scores to both
//! extremes in both worlds, and an interval leaves those out.

use dp_accounting::audit::multi_run::{TestCounts, epsilon_lower_bound};
use serde::Serialize;

/// The many-run audit's result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ManyRunBound {
    /// Runs per world (with and without the canary), half of them choosing the test.
    pub runs: u64,
    /// Scores at or above it (and below `upper`) say "canary in".
    pub lower: f64,
    /// Scores at or above it say "canary out" (infinite: a plain threshold test).
    pub upper: f64,
    /// Counted runs without the canary that the test called "in".
    pub false_positives: u64,
    /// Counted runs with the canary that the test called "out".
    pub false_negatives: u64,
    /// Counted runs per world.
    pub counted: u64,
    /// The epsilon lower bound at the stated confidence.
    pub epsilon: f64,
}

/// Scores in [lower, upper) say "in".
type Interval = (f64, f64);

/// Runs of sorted `scores` that the test `(lower, upper)` calls "in".
fn called_in(scores: &[f64], (lower, upper): Interval) -> usize {
    scores.partition_point(|&s| s < upper).saturating_sub(scores.partition_point(|&s| s < lower))
}

/// The test's error counts on sorted scores.
fn counts(out: &[f64], inside: &[f64], test: Interval) -> TestCounts {
    TestCounts {
        false_positives: called_in(out, test) as u64,
        negatives: out.len() as u64,
        false_negatives: (inside.len() - called_in(inside, test)) as u64,
        positives: inside.len() as u64,
    }
}

/// `scores`, sorted, with NaN (a training that blew up) read as minus infinity: every test then
/// calls it "out", and the counts stay those of a monotone order.
fn sorted(scores: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = scores.iter().map(|&s| if s.is_nan() { f64::NEG_INFINITY } else { s }).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Candidate ends per world: about this many evenly spaced order statistics...
const GRID: usize = 1000;
/// ...and every one of this many smallest and largest scores, where large epsilons are decided.
const TAIL: usize = 50;

/// The least f64 above `x` (`f64::next_up`, which is newer than the workspace's MSRV).
fn next_up(x: f64) -> f64 {
    if x.is_nan() || x == f64::INFINITY {
        x
    } else if x == 0.0 {
        f64::from_bits(1)
    } else if x > 0.0 {
        f64::from_bits(x.to_bits() + 1)
    } else {
        f64::from_bits(x.to_bits() - 1)
    }
}

/// The candidate ends of the interval: order statistics of both worlds' sorted scores, each also
/// just above itself (so an exclusive upper end can take it in), and the infinities.
fn candidate_ends(out: &[f64], inside: &[f64]) -> Vec<f64> {
    let mut ends = vec![f64::NEG_INFINITY, f64::INFINITY];
    for v in [out, inside] {
        let n = v.len();
        let chosen = v.iter().step_by((n / GRID).max(1)).chain(&v[..n.min(TAIL)]).chain(&v[n.saturating_sub(TAIL)..]);
        ends.extend(chosen.flat_map(|&x| [x, next_up(x)]));
    }
    ends.sort_by(f64::total_cmp);
    ends.dedup();
    ends
}

/// The interval with the largest bound on the sorted `out` and `inside` themselves (the runs that
/// choose it), by coordinate ascent over the candidate ends: the best threshold, then the best
/// upper end for it, then the best lower end for that. Ties (a gap between the worlds holds many
/// equally good ends) go to the middle candidate for a lower end and to the largest for an upper
/// one, so the test does not hug the choosing runs' extremes.
fn best_test(out: &[f64], inside: &[f64], delta: f64, confidence: f64) -> Interval {
    let ends = candidate_ends(out, inside);
    let best = |tests: Vec<Interval>, middle: bool| {
        let bounds: Vec<f64> =
            tests.iter().map(|&t| epsilon_lower_bound(counts(out, inside, t), delta, confidence)).collect();
        let top = bounds.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let tied: Vec<Interval> = tests.into_iter().zip(bounds).filter(|&(_, b)| b >= top).map(|(t, _)| t).collect();
        if middle { tied[tied.len() / 2] } else { tied[tied.len() - 1] }
    };
    let (lower, _) = best(ends.iter().filter(|&&l| l < f64::INFINITY).map(|&l| (l, f64::INFINITY)).collect(), true);
    let (_, upper) = best(ends.iter().filter(|&&u| u > lower).map(|&u| (lower, u)).collect(), false);
    best(ends.iter().filter(|&&l| l < upper).map(|&l| (l, upper)).collect(), true)
}

/// The bound from the canary's scores in the runs `without` and `with` it (higher: more likely
/// in), at `confidence` for `delta`.
pub fn many_run_bound(without: &[f64], with: &[f64], delta: f64, confidence: f64) -> ManyRunBound {
    let (choose_out, count_out) = without.split_at(without.len() / 2);
    let (choose_in, count_in) = with.split_at(with.len() / 2);
    let test = best_test(&sorted(choose_out), &sorted(choose_in), delta, confidence);
    let counted = counts(&sorted(count_out), &sorted(count_in), test);
    ManyRunBound {
        runs: without.len() as u64,
        lower: test.0,
        upper: test.1,
        false_positives: counted.false_positives,
        false_negatives: counted.false_negatives,
        counted: counted.negatives,
        epsilon: epsilon_lower_bound(counted, delta, confidence),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separated_scores_give_the_clopper_pearson_bound_and_equal_ones_none() {
        // 200 runs per world, perfectly separated: 100 counted per world, no errors, so the bound
        // is ln((1 - delta - u) / u) with u = 1 - 0.025^(1/100) (Clopper-Pearson for 0 of 100 at
        // 97.5%, half of the 5% budget each).
        let without: Vec<f64> = (0..200).map(|i| -1.0 - f64::from(i) * 1e-3).collect();
        let with: Vec<f64> = (0..200).map(|i| 1.0 + f64::from(i) * 1e-3).collect();
        let b = many_run_bound(&without, &with, 1e-5, 0.95);
        let u = 1.0 - 0.025f64.powf(1.0 / 100.0);
        assert_eq!((b.false_positives, b.false_negatives, b.counted), (0, 0, 100));
        assert!((b.epsilon - ((1.0 - 1e-5 - u) / u).ln()).abs() < 1e-6, "{b:?}");
        let same: Vec<f64> = (0..200).map(|i| f64::from(i % 7)).collect();
        assert_eq!(many_run_bound(&same, &same, 1e-5, 0.95).epsilon, 0.0);
        // NaN scores of either sign count as minus infinity: "out" under any test.
        let mut with_nan = with.clone();
        with_nan[150] = f64::NAN;
        with_nan[160] = -f64::NAN;
        let b = many_run_bound(&without, &with_nan, 1e-5, 0.95);
        assert_eq!((b.false_positives, b.false_negatives), (0, 2), "{b:?}");
    }

    #[test]
    fn an_interval_leaves_out_outliers_of_both_worlds() {
        // "Out" runs near 0, "in" runs near 1, and one run in ten of each thrown to +-1000 (rare,
        // huge noise): no threshold separates them, the interval [0.5, 2) does.
        let outlier =
            |i: u32, x: f64| if i.is_multiple_of(10) { if i.is_multiple_of(20) { 1e3 } else { -1e3 } } else { x };
        let without: Vec<f64> = (0..400).map(|i| outlier(i, f64::from(i % 17) * 1e-3)).collect();
        let with: Vec<f64> = (0..400).map(|i| outlier(i, 1.0 + f64::from(i % 17) * 1e-3)).collect();
        let b = many_run_bound(&without, &with, 1e-5, 0.95);
        assert!(b.lower > 0.016 && b.lower <= 1.0 && b.upper > 1.016 && b.upper <= 1e3, "{b:?}");
        assert_eq!((b.false_positives, b.false_negatives), (0, 20), "{b:?}");
        // The best threshold alone must call the 10 "out" runs at +1000 in, or the 10 "in"
        // runs at +1000 out on top of the 10 at -1000: the interval's bound is larger.
        let threshold = epsilon_lower_bound(
            TestCounts { false_positives: 10, negatives: 200, false_negatives: 10, positives: 200 },
            1e-5,
            0.95,
        );
        assert!(b.epsilon > threshold, "{} vs {threshold}", b.epsilon);
        for x in [-2.5, -0.0, 0.0, 1e-300, 3.0, f64::MAX] {
            let up = next_up(x);
            // Nothing lies strictly between: the midpoint rounds to one of the two.
            let mid = x / 2.0 + up / 2.0;
            assert!(up > x && (mid == x || mid == up), "{x} -> {up}");
        }
    }
}
