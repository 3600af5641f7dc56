//! The analytic Gaussian mechanism against 50-digit mpmath values (tests/data/analytic_gaussian.json).

use dp_accounting::analytic_gaussian::{epsilon_for_delta, noise_for_epsilon};
use serde_json::Value;

#[test]
fn matches_high_precision_reference() {
    let r: Value = serde_json::from_str(include_str!("data/analytic_gaussian.json")).unwrap();
    for c in r["epsilon_for_noise"].as_array().unwrap() {
        let got = epsilon_for_delta(c["noise_multiplier"].as_f64().unwrap(), c["delta"].as_f64().unwrap()).unwrap();
        let want = c["epsilon"].as_f64().unwrap();
        assert!((got - want).abs() <= 1e-9 * want.max(1e-3), "{c}: {got}");
    }
    for c in r["noise_for_epsilon"].as_array().unwrap() {
        let got = noise_for_epsilon(c["epsilon"].as_f64().unwrap(), c["delta"].as_f64().unwrap()).unwrap();
        let want = c["noise_multiplier"].as_f64().unwrap();
        assert!((got - want).abs() <= 1e-9 * want, "{c}: {got}");
    }
}
