//! From canary scores to the one-run bound: guess "in" for the k highest scores and "out" for the
//! k lowest, abstain on the rest, for every k of a fixed grid; the grid is paid for with a
//! Bonferroni correction, so the best k may be reported without losing soundness.

use super::one_run::epsilon_lower_bound;
use serde::Serialize;

/// The one-run audit's result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OneRunBound {
    /// Canaries m.
    pub canaries: u64,
    /// Guesses r = 2k (k "in", k "out").
    pub guesses: u64,
    /// Correct guesses v.
    pub correct: u64,
    /// The epsilon lower bound at the stated confidence (after the grid's correction).
    pub epsilon: f64,
}

/// The numbers of "in" guesses tried: fractions of m from 1% to 50%.
fn grid(m: usize) -> Vec<usize> {
    let mut ks: Vec<usize> = [0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5].iter().map(|f| (f * m as f64) as usize).collect();
    ks.retain(|&k| k >= 1);
    ks.dedup();
    ks
}

/// The best bound over the grid from `scores` (higher: more likely included) and the truth.
pub fn one_run_bound(scores: &[f64], included: &[bool], delta: f64, confidence: f64) -> OneRunBound {
    let m = scores.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let ks = grid(m);
    let each = 1.0 - (1.0 - confidence) / ks.len().max(1) as f64;
    let mut best = OneRunBound { canaries: m as u64, guesses: 0, correct: 0, epsilon: 0.0 };
    for k in ks {
        let correct_in = order[..k].iter().filter(|&&i| included[i]).count();
        let correct_out = order[m - k..].iter().filter(|&&i| !included[i]).count();
        let (r, v) = (2 * k as u64, (correct_in + correct_out) as u64);
        let epsilon = epsilon_lower_bound(m as u64, r, v, delta, each);
        if epsilon > best.epsilon || best.guesses == 0 {
            best = OneRunBound { canaries: m as u64, guesses: r, correct: v, epsilon };
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_scores_give_a_large_bound_and_useless_ones_none() {
        let included: Vec<bool> = (0..1000).map(|i| i % 2 == 0).collect();
        let perfect: Vec<f64> = included.iter().map(|&b| f64::from(u8::from(b))).collect();
        let b = one_run_bound(&perfect, &included, 1e-5, 0.95);
        assert_eq!(b.correct, b.guesses);
        assert!(b.epsilon > 4.0, "{b:?}");
        // Scores that ignore membership: every guess set is half right.
        let blind: Vec<f64> = (0..1000).map(|i| f64::from((i / 2) as u32)).collect();
        assert_eq!(one_run_bound(&blind, &included, 1e-5, 0.95).epsilon, 0.0);
    }
}
