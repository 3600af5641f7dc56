//! Synthetic tables for the ERM tests.

use dp_data::TabularData;
use dp_data::tabular::MissingReport;
use dp_erm::rng::NoiseRng;

/// `n` rows of `d` features in the unit ball with labels from a noisy linear rule over `classes`.
pub fn synthetic(n: usize, d: usize, classes: usize, seed: u64) -> TabularData {
    let mut rng = NoiseRng::new(Some(seed), 99);
    let directions: Vec<Vec<f64>> = (0..classes).map(|_| (0..d).map(|_| rng.normal()).collect()).collect();
    let mut features = Vec::with_capacity(n * d);
    let mut labels = Vec::with_capacity(n);
    for _ in 0..n {
        let mut x: Vec<f64> = (0..d).map(|_| rng.normal()).collect();
        let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        let scale = (0.3 + 0.7 * (rng.index(1000) as f64 / 1000.0)) / norm;
        x.iter_mut().for_each(|v| *v *= scale);
        let scores: Vec<f64> =
            directions.iter().map(|w| w.iter().zip(&x).map(|(a, b)| a * b).sum::<f64>() + 0.3 * rng.normal()).collect();
        labels.push(
            scores.iter().enumerate().fold((0, f64::NEG_INFINITY), |b, (i, &s)| if s > b.1 { (i, s) } else { b }).0,
        );
        features.extend(x);
    }
    TabularData {
        features,
        dim: d,
        labels,
        classes: (0..classes).map(|c| c.to_string()).collect(),
        feature_names: (0..d).map(|j| format!("x{j}")).collect(),
        categorical: Vec::new(),
        missing: MissingReport::default(),
    }
}
