//! Feature scaling for DP-ERM: the papers assume every row has L2 norm at most 1. Each feature is
//! min-max scaled to [0, 1] with the training rows' range, an intercept feature 1 is appended, and
//! each row is divided by its own norm when that exceeds 1 (a per-row map, so no row's scaling
//! depends on another row beyond the min-max range, a non-private preprocessing step the papers
//! share).

use crate::tabular::TabularData;
use serde::Serialize;

/// The per-feature range fitted on training rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnitBallScaler {
    min: Vec<f64>,
    max: Vec<f64>,
}

impl UnitBallScaler {
    /// The range of every feature over `train`.
    pub fn fit(train: &TabularData) -> Self {
        let mut min = vec![f64::INFINITY; train.dim];
        let mut max = vec![f64::NEG_INFINITY; train.dim];
        for i in 0..train.len() {
            for (j, &v) in train.row(i).iter().enumerate() {
                min[j] = min[j].min(v);
                max[j] = max[j].max(v);
            }
        }
        Self { min, max }
    }

    /// The scaled copy of `data`: features in [0, 1] (outside for test rows beyond the training
    /// range), then an intercept 1, then each row projected into the unit ball.
    pub fn transform(&self, data: &TabularData) -> TabularData {
        let dim = data.dim + 1;
        let mut features = Vec::with_capacity(data.len() * dim);
        for i in 0..data.len() {
            let start = features.len();
            for (j, &v) in data.row(i).iter().enumerate() {
                let range = self.max[j] - self.min[j];
                features.push(if range > 0.0 { (v - self.min[j]) / range } else { 0.0 });
            }
            features.push(1.0);
            let row = &mut features[start..];
            let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt();
            if norm > 1.0 {
                row.iter_mut().for_each(|v| *v /= norm);
            }
        }
        let mut feature_names = data.feature_names.clone();
        feature_names.push("intercept".into());
        TabularData { features, dim, feature_names, ..data.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tabular::MissingReport;

    #[test]
    fn rows_land_in_the_unit_ball() {
        let data = TabularData {
            features: vec![0.0, 10.0, 2.0, 30.0, 1.0, 20.0],
            dim: 2,
            labels: vec![0, 1, 0],
            classes: vec!["a".into(), "b".into()],
            feature_names: vec!["x".into(), "y".into()],
            categorical: Vec::new(),
            missing: MissingReport::default(),
        };
        let scaler = UnitBallScaler::fit(&data);
        let scaled = scaler.transform(&data);
        assert_eq!(scaled.dim, 3);
        // Row 0 is (0, 0, 1): norm 1, kept. Row 1 is (1, 1, 1) / sqrt(3).
        assert_eq!(scaled.row(0), [0.0, 0.0, 1.0]);
        let s = 1.0 / 3f64.sqrt();
        assert!(scaled.row(1).iter().all(|v| (v - s).abs() < 1e-15));
        for i in 0..scaled.len() {
            assert!(scaled.row(i).iter().map(|v| v * v).sum::<f64>() <= 1.0 + 1e-12);
        }
        // Row 2 is (0.5, 0.5, 1) / sqrt(1.5).
        assert!((scaled.row(2)[0] - 0.5 / 1.5f64.sqrt()).abs() < 1e-15);
    }
}
