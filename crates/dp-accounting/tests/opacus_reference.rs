//! RDP epsilons against Opacus 1.6 (values and provenance in tests/data/opacus_rdp.json).

use dp_accounting::{Accountant, Conversion, OrderGrid, PrivacyLedger, RdpAccountant};
use serde_json::Value;

fn reference() -> Value {
    serde_json::from_str(include_str!("data/opacus_rdp.json")).expect("reference file is valid JSON")
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("missing {key}"))
}

#[test]
fn matches_opacus_to_1e6_relative_on_the_grid() {
    let r = reference();
    let cases = r["cases"].as_array().unwrap();
    assert!(cases.len() >= 400);
    let standard = RdpAccountant::new(OrderGrid::Standard, Conversion::Balle2020);
    let extended = RdpAccountant::default();
    let mut worst: f64 = 0.0;
    for c in cases {
        let ledger =
            PrivacyLedger::homogeneous(f(c, "noise_multiplier"), f(c, "sample_rate"), f(c, "steps") as u64).unwrap();
        let (want, want_order) = (f(c, "epsilon"), f(c, "optimal_order"));
        let got = standard.epsilon(&ledger, f(c, "delta")).unwrap();
        let rel = (got.epsilon - want).abs() / want;
        worst = worst.max(rel);
        assert!(rel <= 1e-6, "{c}: got {} (order {:?})", got.epsilon, got.optimal_order);
        assert_eq!(got.optimal_order, Some(want_order), "{c}");
        // The extended grid can only help, and where Opacus's optimum is interior it finds the same.
        let ext = extended.epsilon(&ledger, f(c, "delta")).unwrap().epsilon;
        assert!(ext <= got.epsilon * (1.0 + 1e-12), "{c}: extended {ext}");
        if !got.optimal_order_at_grid_edge.unwrap() {
            assert!((ext - got.epsilon).abs() <= 1e-12 * got.epsilon, "{c}: extended {ext}");
        }
    }
    eprintln!("worst relative difference to Opacus: {worst:e}");
}

#[test]
fn mnist_tutorial_setting_is_2_5966() {
    let ledger = PrivacyLedger::homogeneous(1.1, 256.0 / 60000.0, 14062).unwrap();
    let eps = RdpAccountant::default().epsilon(&ledger, 1e-5).unwrap().epsilon;
    assert!((eps - 2.5966).abs() < 5e-5, "{eps}");
}

#[test]
fn heterogeneous_ledgers_match_opacus() {
    let r = reference();
    let standard = RdpAccountant::new(OrderGrid::Standard, Conversion::Balle2020);
    for c in r["heterogeneous"].as_array().unwrap() {
        let mut ledger = PrivacyLedger::new();
        for s in c["segments"].as_array().unwrap() {
            ledger.record(f(s, "noise_multiplier"), f(s, "sample_rate"), f(s, "steps") as u64).unwrap();
        }
        let got = standard.epsilon(&ledger, f(c, "delta")).unwrap();
        let want = f(c, "epsilon");
        assert!((got.epsilon - want).abs() <= 1e-6 * want, "{c}: got {}", got.epsilon);
    }
}
