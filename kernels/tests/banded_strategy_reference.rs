//! The banded Toeplitz strategy against jax-privacy 2.0.0's `optimize_banded_toeplitz`
//! (scripts/reference/bandmf_strategy.py, values in tests/data/bandmf_strategy.json): for each
//! (steps, bands) up to 2000 and 64, a prefix-sum error within 1% of its own (or below it), the
//! column norm 1, and its coefficients' error recomputed here equal to the one jax-privacy reports.

use dp_kernels::banded_strategy::BandedStrategy;
use serde_json::Value;

#[test]
fn the_strategy_is_within_one_percent_of_jax_privacys() {
    let reference: Value =
        serde_json::from_str(include_str!("data/bandmf_strategy.json")).expect("the reference values");
    let strategies = reference["strategies"].as_array().expect("a list of strategies");
    assert_eq!(strategies.len(), 7);
    for r in strategies {
        let steps = r["steps"].as_u64().expect("steps") as usize;
        let bands = r["bands"].as_u64().expect("bands") as usize;
        let theirs = r["loss"].as_f64().expect("loss");
        let coefficients: Vec<f64> =
            r["coefficients"].as_array().expect("coefficients").iter().map(|c| c.as_f64().expect("a float")).collect();
        let recomputed = BandedStrategy::from_coefficients(coefficients, steps).expect("their strategy");
        assert!((recomputed.error / theirs - 1.0).abs() < 1e-9, "({steps}, {bands}): {} vs {theirs}", recomputed.error);
        let ours = BandedStrategy::optimal(steps, bands).expect("a strategy");
        assert_eq!(ours.bands(), bands);
        assert!((ours.column_norm() - 1.0).abs() < 1e-12);
        assert!(ours.error <= 1.01 * theirs, "({steps}, {bands}): ours {} vs jax-privacy {theirs}", ours.error);
        eprintln!("({steps}, {bands}): ours {:.6} jax-privacy {theirs:.6}", ours.error);
    }
}
