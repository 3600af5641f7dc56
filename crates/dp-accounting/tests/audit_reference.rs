//! The audit bounds against scipy (tests/data/audit.json, from scripts/reference/audit.py): the
//! one-run p-value of Steinke, Nasr and Jagielski's published code on scipy's binomial, its epsilon
//! bound by brentq, Clopper-Pearson bounds from scipy's beta quantiles, and the many-run bound.

use dp_accounting::audit::binomial::clopper_pearson_upper;
use dp_accounting::audit::multi_run::{TestCounts, epsilon_lower_bound as multi_run_bound};
use dp_accounting::audit::one_run::{epsilon_lower_bound, p_value};
use serde_json::Value;

fn reference() -> Value {
    serde_json::from_str(include_str!("data/audit.json")).unwrap()
}

fn u(c: &Value, key: &str) -> u64 {
    c[key].as_u64().unwrap()
}

fn f(c: &Value, key: &str) -> f64 {
    c[key].as_f64().unwrap()
}

#[test]
fn one_run_p_values_match_the_papers_code() {
    for c in reference()["p_value"].as_array().unwrap() {
        let got = p_value(u(c, "m"), u(c, "r"), u(c, "v"), f(c, "epsilon"), f(c, "delta"));
        let want = f(c, "p");
        assert!((got - want).abs() <= 1e-9 * want.max(1e-12), "{c}: {got}");
    }
}

#[test]
fn one_run_epsilon_bounds_match_an_independent_root_finder() {
    let cases = reference()["epsilon_lower_bound"].as_array().unwrap().clone();
    for c in &cases {
        let got = epsilon_lower_bound(u(c, "m"), u(c, "r"), u(c, "v"), f(c, "delta"), f(c, "confidence"));
        let want = f(c, "epsilon");
        assert!((got - want).abs() <= 1e-8 * want.max(1.0), "{c}: {got}");
    }
    // The cases include a bound of zero (half right) and a large one (all 1000 right).
    assert!(cases.iter().any(|c| f(c, "epsilon") == 0.0) && cases.iter().any(|c| f(c, "epsilon") > 5.0));
}

#[test]
fn clopper_pearson_and_many_run_bounds_match_scipy() {
    let r = reference();
    for c in r["clopper_pearson_upper"].as_array().unwrap() {
        let got = clopper_pearson_upper(u(c, "k"), u(c, "n"), f(c, "confidence"));
        assert!((got - f(c, "upper")).abs() <= 1e-10, "{c}: {got}");
    }
    for c in r["multi_run"].as_array().unwrap() {
        let counts = TestCounts {
            false_positives: u(c, "false_positives"),
            negatives: u(c, "negatives"),
            false_negatives: u(c, "false_negatives"),
            positives: u(c, "positives"),
        };
        let got = multi_run_bound(counts, f(c, "delta"), f(c, "confidence"));
        assert!((got - f(c, "epsilon")).abs() <= 1e-8 * f(c, "epsilon").max(1.0), "{c}: {got}");
    }
}
