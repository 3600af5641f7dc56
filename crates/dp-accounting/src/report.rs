//! What a privacy claim is: an epsilon, its delta, the accountant that produced it and the
//! guarantee label that says how much to trust it. No epsilon leaves the crate without a label.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How much a printed epsilon can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Guarantee {
    /// A sound proof for this exact algorithm, computed by a sound accountant.
    Certified,
    /// The paper's own formula, with unspecified constants or a heuristic step.
    PaperBound,
    /// No guarantee: the number is shown only for comparison.
    None,
}

impl fmt::Display for Guarantee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Guarantee::Certified => "certified",
            Guarantee::PaperBound => "paper-bound",
            Guarantee::None => "none",
        })
    }
}

/// An (epsilon, delta) claim with its provenance: the one labelled-epsilon type of the
/// workspace, for the image engine and the DP-ERM methods alike. Fields that belong to one accountant only are
/// `None` for the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrivacyReport {
    /// The epsilon claimed (for the PRV accountant: its upper bound); infinite when something
    /// was released without privacy (JSON writes it as null).
    #[serde(deserialize_with = "infinite_when_null")]
    pub epsilon: f64,
    /// The delta at which epsilon holds.
    pub delta: f64,
    /// Which accountant computed it (`rdp`, `prv`, `analytic`, or a paper's name).
    pub accountant: String,
    /// How much to trust it.
    pub guarantee: Guarantee,
    /// RDP: the order at which the conversion was tightest.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub optimal_order: Option<f64>,
    /// RDP: true when the optimum sits at the end of the order grid (a wider grid may do better).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub optimal_order_at_grid_edge: Option<bool>,
    /// RDP: the RDP-to-DP conversion used.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub conversion: Option<String>,
    /// PRV: the point estimate of epsilon (not a bound).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub epsilon_estimate: Option<f64>,
    /// PRV: a lower bound on the true epsilon of the accounted mechanism.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub epsilon_lower: Option<f64>,
    /// PRV: the stated discretization error in epsilon.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub eps_error: Option<f64>,
    /// PRV: the stated error in delta.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delta_error: Option<f64>,
    /// Analytic: the noise multiplier of the single Gaussian equivalent to the whole run.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub effective_noise_multiplier: Option<f64>,
}

impl PrivacyReport {
    /// A report with only the fields every accountant fills.
    pub fn new(epsilon: f64, delta: f64, accountant: &str, guarantee: Guarantee) -> Self {
        Self {
            epsilon,
            delta,
            accountant: accountant.to_string(),
            guarantee,
            optimal_order: None,
            optimal_order_at_grid_edge: None,
            conversion: None,
            epsilon_estimate: None,
            epsilon_lower: None,
            eps_error: None,
            delta_error: None,
            effective_noise_multiplier: None,
        }
    }
}

impl fmt::Display for PrivacyReport {
    /// One line, never an epsilon without its label: `epsilon 2.5966 (delta 1e-5, rdp,
    /// certified)`, or `epsilon infinite (no privacy, label none)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.show(f, self.guarantee)
    }
}

impl PrivacyReport {
    /// This report read as a plan (what a run would spend if every planned step ran): the
    /// label `planned` in place of its guarantee, for only what ran earns a guarantee.
    pub fn planned(&self) -> Planned<'_> {
        Planned(self)
    }

    /// The report's line with `label` as its label.
    fn show(&self, f: &mut fmt::Formatter<'_>, label: impl fmt::Display) -> fmt::Result {
        let eps = match self.epsilon {
            e if e.is_infinite() => return write!(f, "epsilon infinite (no privacy, label {label})"),
            e if e == 0.0 || e >= 0.01 => format!("{e:.4}"),
            e => format!("{e:.3e}"),
        };
        write!(f, "epsilon {eps} (delta {:e}, {}, {label})", self.delta, self.accountant)
    }
}

/// A report shown as a plan: `epsilon 3.0000 (delta 1e-5, rdp, planned)` ([`PrivacyReport::planned`]).
pub struct Planned<'a>(&'a PrivacyReport);

impl fmt::Display for Planned<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.show(f, "planned")
    }
}

/// Reads an epsilon that JSON wrote as null (JSON has no infinity) as infinite.
fn infinite_when_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_serializes_as_kebab_case() {
        assert_eq!(serde_json::to_string(&Guarantee::PaperBound).unwrap(), "\"paper-bound\"");
        let r = PrivacyReport::new(1.5, 1e-5, "rdp", Guarantee::Certified);
        assert_eq!(r.to_string(), "epsilon 1.5000 (delta 1e-5, rdp, certified)");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["guarantee"], "certified");
        assert!(json.get("optimal_order").is_none());
        let none = PrivacyReport::new(f64::INFINITY, 1e-5, "rdp", Guarantee::None);
        assert_eq!(none.to_string(), "epsilon infinite (no privacy, label none)");
        let json = serde_json::to_string(&none).unwrap();
        assert!(json.contains(r#""epsilon":null"#), "{json}");
        let back: PrivacyReport = serde_json::from_str(&json).unwrap();
        assert!(back.epsilon.is_infinite());
    }

    #[test]
    fn a_plan_is_never_shown_with_a_guarantee() {
        let plan = PrivacyReport::new(3.0, 1e-5, "prv", Guarantee::Certified);
        assert_eq!(plan.planned().to_string(), "epsilon 3.0000 (delta 1e-5, prv, planned)");
        let paper = PrivacyReport::new(0.5, 1e-5, "lssgd-paper", Guarantee::PaperBound);
        assert_eq!(paper.planned().to_string(), "epsilon 0.5000 (delta 1e-5, lssgd-paper, planned)");
    }
}
