//! What one run of a method costs, in passes over the training rows (one pass: the loss
//! gradient of every row once), so that `dptrain erm` can say before a long experiment how long
//! each method will take: a softmax over 1,000 classes makes DBDP-IF's influence function a
//! conjugate gradient of up to 1,000 Hessian products per step, hours where the other methods
//! take seconds.

use std::fmt;

/// The passes of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// Passes every run takes.
    pub passes: f64,
    /// Passes it may take at most, when that depends on how fast a solver converges.
    pub up_to: Option<f64>,
    /// Passes taken once for the whole experiment (a cached solution or factorisation).
    pub once: f64,
}

impl Cost {
    /// A fixed number of passes per run.
    pub fn per_run(passes: f64) -> Self {
        Self { passes, up_to: None, once: 0.0 }
    }

    /// Seconds for `runs` runs when a pass takes `pass_seconds`: (expected, at most).
    pub fn seconds(&self, runs: usize, pass_seconds: f64) -> (f64, f64) {
        let each = |passes: f64| (self.once + passes * runs as f64) * pass_seconds;
        (each(self.passes), each(self.up_to.unwrap_or(self.passes)))
    }
}

/// A duration in the unit that reads best.
pub struct Took(pub f64);

impl fmt::Display for Took {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            s if s < 1.0 => write!(f, "{:.0} ms", s * 1e3),
            s if s < 120.0 => write!(f, "{s:.1} s"),
            s if s < 7200.0 => write!(f, "{:.0} min", s / 60.0),
            s => write!(f, "{:.1} h", s / 3600.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::{Method, Problem, Settings, cost};
    use crate::model_kind::ModelKind;
    use dp_data::TabularData;

    /// `n` rows of 5 features with labels cycling over `classes`.
    fn table(n: usize, classes: usize) -> TabularData {
        TabularData {
            features: (0..n * 5).map(|i| ((i * 37 % 101) as f64 / 101.0) - 0.5).collect(),
            dim: 5,
            labels: (0..n).map(|i| i % classes).collect(),
            classes: (0..classes).map(|c| format!("c{c}")).collect(),
            feature_names: (0..5).map(|j| format!("x{j}")).collect(),
            categorical: Vec::new(),
            missing: Default::default(),
        }
    }

    #[test]
    fn many_classes_make_dbdp_if_a_conjugate_gradient_and_say_so() {
        let problem = |classes: usize| {
            Problem::new(ModelKind::Logreg, table(classes.max(40), classes), table(10, classes), Settings::default())
                .unwrap()
        };
        let binary = problem(2);
        let dbdp_if = cost(&binary, Method::DbdpIf);
        assert!(
            dbdp_if.up_to.is_none() && dbdp_if.once == binary.model.dim() as f64,
            "a factored Hessian: {dbdp_if:?}"
        );
        assert_eq!(cost(&binary, Method::Input), Cost::per_run(100.0), "T full passes");
        let many = problem(900);
        assert!(many.model.dim() > crate::inverse_hessian::DENSE_LIMIT);
        let dbdp_if = cost(&many, Method::DbdpIf);
        assert_eq!(dbdp_if.up_to, Some(100.0 * 2.0 * 1000.0), "up to 1,000 products of two passes per step");
        assert!(dbdp_if.passes > 100.0 * cost(&many, Method::Input).passes, "{dbdp_if:?}");
        // Methods the model refuses cost nothing.
        assert_eq!(cost(&many, Method::Objective), Cost::per_run(0.0), "softmax: no rank-one Hessians");
        assert!(many.pass_seconds() > 0.0);
    }

    #[test]
    fn runs_and_solvers_add_up() {
        let c = Cost { passes: 10.0, up_to: Some(100.0), once: 5.0 };
        assert_eq!(c.seconds(3, 0.5), (17.5, 152.5));
        assert_eq!(Cost::per_run(2.0).seconds(4, 1.0), (8.0, 8.0));
        assert_eq!(Took(0.25).to_string(), "250 ms");
        assert_eq!(Took(90.0).to_string(), "90.0 s");
        assert_eq!(Took(600.0).to_string(), "10 min");
        assert_eq!(Took(36_000.0).to_string(), "10.0 h");
    }
}
