//! The PRV accountant against independent tight values (dp-accounting PLD and prv-accountant,
//! provenance in tests/data/tight_epsilon.json), and against the exact analytic Gaussian.

use dp_accounting::analytic_gaussian::epsilon_for_delta;
use dp_accounting::{Accountant, PrivacyLedger, PrvAccountant};
use serde_json::Value;

fn f(v: &Value, key: &str) -> Option<f64> {
    v[key].as_f64()
}

#[test]
fn prv_upper_bound_is_sound_and_within_one_percent() {
    let r: Value = serde_json::from_str(include_str!("data/tight_epsilon.json")).unwrap();
    for c in r["cases"].as_array().unwrap() {
        let (z, q, t, delta) = (
            f(c, "noise_multiplier").unwrap(),
            f(c, "sample_rate").unwrap(),
            f(c, "steps").unwrap() as u64,
            f(c, "delta").unwrap(),
        );
        // The exact epsilon lies in [tight_lower, tight_upper]: the pessimistic PLD is an upper
        // bound; the optimistic PLD and prv-accountant's lower bound are lower bounds.
        let tight_upper = f(c, "pld_upper").unwrap();
        let tight_lower = f(c, "pld_lower").unwrap().max(f(c, "prv_lower").unwrap_or(0.0));
        let report = PrvAccountant::default().epsilon(&PrivacyLedger::homogeneous(z, q, t).unwrap(), delta).unwrap();
        let upper = report.epsilon;
        let slack = if tight_upper < 1.0 { 0.01 } else { 0.01 * tight_upper };
        assert!(upper >= tight_lower, "{c}: upper {upper} below the exact epsilon's lower bound");
        assert!(upper <= tight_upper + slack, "{c}: upper {upper} more than 1% above tight");
        let (est, lower) = (report.epsilon_estimate.unwrap(), report.epsilon_lower.unwrap());
        assert!(lower <= tight_upper, "{c}: lower {lower}");
        assert!(lower <= est && est <= upper);
        eprintln!(
            "z={z} q={q} T={t}: prv [{lower:.4}, {upper:.4}] est {est:.4}, tight [{tight_lower:.4}, {tight_upper:.4}]"
        );
    }
}

#[test]
fn full_batch_prv_brackets_the_exact_gaussian() {
    // q = 1: T steps with multiplier z are one Gaussian with multiplier z / sqrt(T).
    for &(z, t, delta) in &[(5.0, 100u64, 1e-5), (20.0, 1000, 1e-6), (2.0, 1, 1e-5)] {
        let exact = epsilon_for_delta(z / (t as f64).sqrt(), delta).unwrap();
        let r = PrvAccountant::default().epsilon(&PrivacyLedger::homogeneous(z, 1.0, t).unwrap(), delta).unwrap();
        assert!(r.epsilon_lower.unwrap() <= exact && exact <= r.epsilon, "z={z} T={t}: {exact} vs {r:?}");
        assert!(r.epsilon <= exact + 0.01 * exact.max(1.0), "z={z} T={t}: {} vs {exact}", r.epsilon);
    }
}

#[test]
fn heterogeneous_prv_matches_its_equivalent_gaussian() {
    // Full-batch steps with different multipliers compose to one Gaussian: 1/z^2 = sum 1/z_i^2.
    let mut ledger = PrivacyLedger::new();
    ledger.record(3.0, 1.0, 40).unwrap();
    ledger.record(6.0, 1.0, 100).unwrap();
    let z_eff = 1.0 / (40.0 / 9.0 + 100.0 / 36.0f64).sqrt();
    let exact = epsilon_for_delta(z_eff, 1e-5).unwrap();
    let r = PrvAccountant::default().epsilon(&ledger, 1e-5).unwrap();
    assert!(r.epsilon_lower.unwrap() <= exact && exact <= r.epsilon, "{exact} vs {r:?}");
}

#[test]
fn prv_refuses_what_it_cannot_bound() {
    let ledger = PrivacyLedger::homogeneous(1.0, 0.01, 1000).unwrap();
    assert!(PrvAccountant::default().epsilon(&ledger, 1e-14).is_err());
    let bad = PrvAccountant { eps_error: None, delta_error: Some(1e-3) };
    assert!(bad.epsilon(&ledger, 1e-5).is_err());
}
