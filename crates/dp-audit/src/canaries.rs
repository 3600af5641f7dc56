//! Canaries for the one-run audit: fair coins for inclusion, and mislabeled rows for black-box
//! audits (a copy of a random training row with its label moved to another class: only training
//! on it makes its loss small, so the loss tells whether it was in).

use dp_data::TabularData;
use dp_erm::rng::NoiseRng;

/// `m` independent fair coins: which canaries are in the training set.
pub fn coin_flips(m: usize, rng: &mut NoiseRng) -> Vec<bool> {
    (0..m).map(|_| rng.bernoulli(0.5)).collect()
}

/// `m` mislabeled copies of random rows of `data` (each label moved to a random other class).
pub fn mislabeled(data: &TabularData, m: usize, rng: &mut NoiseRng) -> TabularData {
    let rows: Vec<usize> = (0..m).map(|_| rng.index(data.len())).collect();
    let mut canaries = data.select(&rows);
    let classes = data.classes.len();
    for label in &mut canaries.labels {
        *label = (*label + 1 + rng.index(classes - 1)) % classes;
    }
    canaries
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
