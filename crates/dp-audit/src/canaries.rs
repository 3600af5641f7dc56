//! Canaries for the one-run audit: fair coins for inclusion, and out-of-distribution rows for
//! black-box audits. Each black-box canary is the unit vector of a feature of its own, a feature
//! that is zero in every real row, with a random label: a legal record (norm 1, like every scaled
//! row), and one that only training on it can fit, so its loss under the released model says
//! whether it was in. (Mislabeled copies of real rows, tried first, found nothing on Breast
//! Cancer even without noise: a copy's loss varies more between rows than with its inclusion.)

use dp_data::TabularData;
use dp_erm::linalg::{Matrix, dot, power_iteration};
use dp_erm::rng::NoiseRng;
use dp_erm::{ErmError, Result};

/// Inverse-iteration steps for the least-variance direction (each one Cholesky solve of a
/// dim x dim system; convergence is geometric in the ratio of the two smallest eigenvalues).
const INVERSE_ITERATIONS: usize = 200;

/// `m` independent fair coins: which canaries are in the training set.
pub fn coin_flips(m: usize, rng: &mut NoiseRng) -> Vec<bool> {
    (0..m).map(|_| rng.bernoulli(0.5)).collect()
}

/// `data` with `extra` features appended to every row, all zero (room for the canaries' own
/// features; no real row's norm changes).
pub fn widened(data: &TabularData, extra: usize) -> TabularData {
    let dim = data.dim + extra;
    let mut out = data.clone();
    out.features =
        (0..data.len()).flat_map(|i| data.row(i).iter().copied().chain(std::iter::repeat_n(0.0, extra))).collect();
    out.dim = dim;
    out.feature_names.extend((0..extra).map(|i| format!("canary_{i}")));
    out
}

/// `m` out-of-distribution canaries for rows of `data` widened by `m` features: canary i is the
/// unit vector of feature `data.dim + i`, with a uniformly random label.
pub fn out_of_distribution(data: &TabularData, m: usize, rng: &mut NoiseRng) -> TabularData {
    let dim = data.dim + m;
    let mut features = vec![0.0; m * dim];
    for i in 0..m {
        features[i * dim + data.dim + i] = 1.0;
    }
    let mut canaries = widened(&data.select(&[]), m);
    canaries.features = features;
    canaries.labels = (0..m).map(|_| rng.index(data.classes.len())).collect();
    canaries
}

/// One canary for the many-run audit: the unit vector along which the rows of `data` vary least
/// (the eigenvector of the smallest eigenvalue of X^T X / n, by inverse iteration), labelled with
/// the class `loss` (of a label, at that vector) finds least likely under a model trained
/// without it. Training on it moves a model furthest there, and sampling the other rows moves it
/// least, so it is the single record a threshold test separates best.
pub fn least_variance(data: &TabularData, loss: impl Fn(&[f64], usize) -> f64) -> Result<TabularData> {
    let (n, dim) = (data.len().max(1) as f64, data.dim);
    let mut gram = Matrix::scaled_identity(dim, 0.0);
    for i in 0..data.len() {
        let x = data.row(i);
        for a in 0..dim {
            for b in 0..dim {
                gram[(a, b)] += x[a] * x[b] / n;
            }
        }
    }
    let trace: f64 = (0..dim).map(|a| gram[(a, a)]).sum();
    // A shift of 1e-9 of the mean eigenvalue keeps the factorisation defined when X^T X is singular
    // (a constant feature) without moving any eigenvector.
    let shift = 1e-9 * trace / dim as f64 + f64::MIN_POSITIVE;
    (0..dim).for_each(|a| gram[(a, a)] += shift);
    let factor =
        gram.cholesky().ok_or_else(|| ErmError::Numerical("X^T X / n + shift I is not positive definite".into()))?;
    // Inverse iteration: power iteration on (X^T X / n + shift I)^{-1}.
    let (_, v) = power_iteration(dim, |v| factor.solve(v), 0.0, INVERSE_ITERATIONS);
    if !v.iter().all(|x| x.is_finite()) || (dot(&v, &v) - 1.0).abs() > 1e-9 {
        return Err(ErmError::Numerical("inverse iteration for the least-variance direction diverged".into()));
    }
    let label = (0..data.classes.len()).max_by(|&a, &b| loss(&v, a).total_cmp(&loss(&v, b))).unwrap_or(0);
    let mut canary = data.select(&[]);
    canary.features = v;
    canary.labels = vec![label];
    Ok(canary)
}

/// `data` with the included canaries appended.
pub fn with_canaries(data: &TabularData, canaries: &TabularData, included: &[bool]) -> TabularData {
    let chosen: Vec<usize> = (0..canaries.len()).filter(|&i| included[i]).collect();
    let added = canaries.select(&chosen);
    let mut out = data.clone();
    out.features.extend(added.features);
    out.labels.extend(added.labels);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dp_erm::linalg::norm;

    #[test]
    fn canaries_are_unit_vectors_on_features_no_real_row_uses() {
        let data = TabularData {
            features: vec![0.6, 0.8, 0.0, 1.0],
            dim: 2,
            labels: vec![0, 1],
            classes: vec!["a".into(), "b".into(), "c".into()],
            feature_names: vec!["u".into(), "v".into()],
            categorical: Vec::new(),
            missing: Default::default(),
        };
        let mut rng = NoiseRng::new(Some(3), 0);
        let canaries = out_of_distribution(&data, 3, &mut rng);
        let train = with_canaries(&widened(&data, 3), &canaries, &[true, false, true]);
        assert_eq!(train.dim, 5);
        assert_eq!(train.len(), 4);
        assert_eq!(train.row(0), &[0.6, 0.8, 0.0, 0.0, 0.0]);
        assert_eq!(train.row(2), &[0.0, 0.0, 1.0, 0.0, 0.0]);
        assert_eq!(train.row(3), &[0.0, 0.0, 0.0, 0.0, 1.0]);
        assert_eq!(train.labels[2], canaries.labels[0]);
        assert!(canaries.labels.iter().all(|&y| y < 3));
    }

    #[test]
    fn the_least_variance_canary_is_the_smallest_eigenvector() {
        // Rows spread along (1, 1) and barely along (1, -1): the canary is +-(1, -1) / sqrt(2).
        let features = vec![0.9, 0.8, -0.7, -0.72, 0.5, 0.52, -0.3, -0.29, 0.1, 0.12];
        let data = TabularData {
            features,
            dim: 2,
            labels: vec![0; 5],
            classes: vec!["a".into(), "b".into()],
            feature_names: vec!["u".into(), "v".into()],
            categorical: Vec::new(),
            missing: Default::default(),
        };
        // The label is the one the given loss finds least likely.
        let canary = least_variance(&data, |_, y| if y == 1 { 2.0 } else { 0.5 }).unwrap();
        assert_eq!(canary.labels, vec![1]);
        let x = canary.row(0);
        // The exact answer from the 2 x 2 eigenproblem of the Gram matrix [[a, b], [b, c]].
        let (mut a, mut b, mut c) = (0.0, 0.0, 0.0);
        for i in 0..5 {
            let r = data.row(i);
            (a, b, c) = (a + r[0] * r[0], b + r[0] * r[1], c + r[1] * r[1]);
        }
        let small = (a + c) / 2.0 - (((a - c) / 2.0).powi(2) + b * b).sqrt();
        let exact = [b, small - a];
        let length = norm(&exact);
        let cosine = (x[0] * exact[0] + x[1] * exact[1]).abs() / length;
        assert!((cosine - 1.0).abs() < 1e-9, "{x:?} vs {exact:?}");
        assert_eq!(canary.len(), 1);
    }
}
