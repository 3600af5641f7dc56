//! BandMF with cyclic Poisson sampling against jax-privacy 2.0.0's `DpsgdTrainingAccountant` with
//! `cycle_length` (scripts/reference/bandmf_accounting.py, values in
//! tests/data/bandmf_accounting.json): a ledger of T cyclic-banded steps over b groups gives an
//! RDP epsilon never above jax-privacy's RDP (ours optimises over more orders) and never below its
//! PLD value, a PRV epsilon within 1% of the PLD value, and at b = 1 today's DP-SGD figures.

use dp_accounting::{Accountant, DpEvent, Guarantee, PrivacyLedger, PrvAccountant, RdpAccountant};
use serde_json::Value;

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

#[test]
fn cyclic_banded_steps_are_accounted_as_jax_privacy_does() {
    let r: Value = serde_json::from_str(include_str!("data/bandmf_accounting.json")).expect("the reference values");
    let cases = r["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 6);
    for c in cases {
        let (n, lot, steps, z, bands, delta) = (
            f(c, "examples"),
            f(c, "lot"),
            f(c, "steps") as u64,
            f(c, "noise_multiplier"),
            f(c, "bands") as u64,
            f(c, "delta"),
        );
        let q = lot / (n as u64 / bands) as f64;
        let mut ledger = PrivacyLedger::new();
        ledger.record_event(DpEvent::cyclic_banded(z, q, bands, bands).unwrap(), steps).unwrap();
        let rdp = RdpAccountant::default().epsilon(&ledger, delta).unwrap();
        let prv = PrvAccountant::default().epsilon(&ledger, delta).unwrap();
        let (their_rdp, pld) = (f(c, "rdp"), f(c, "pld"));
        assert_eq!((rdp.guarantee, prv.guarantee), (Guarantee::Certified, Guarantee::Certified));
        assert!(rdp.epsilon <= their_rdp * (1.0 + 1e-9), "{c}: rdp {} above jax-privacy's", rdp.epsilon);
        assert!(rdp.epsilon >= pld, "{c}: rdp {} below the PLD value", rdp.epsilon);
        assert!((prv.epsilon / pld - 1.0).abs() <= 0.01, "{c}: prv {} vs pld {pld}", prv.epsilon);
        if bands == 1 {
            let dp_sgd = PrivacyLedger::homogeneous(z, q, steps).unwrap();
            assert_eq!(rdp, RdpAccountant::default().epsilon(&dp_sgd, delta).unwrap(), "one band is DP-SGD");
            assert_eq!(prv, PrvAccountant::default().epsilon(&dp_sgd, delta).unwrap(), "one band is DP-SGD");
        }
        eprintln!("{c}: rdp {:.4} prv {:.4}", rdp.epsilon, prv.epsilon);
    }
}

#[test]
fn more_bands_than_groups_is_not_certified() {
    let mut ledger = PrivacyLedger::new();
    ledger.record_event(DpEvent::cyclic_banded(1.0, 0.02, 8, 4).unwrap(), 100).unwrap();
    for report in [RdpAccountant::default().epsilon(&ledger, 1e-5), PrvAccountant::default().epsilon(&ledger, 1e-5)] {
        assert_eq!(report.unwrap().guarantee, Guarantee::None);
    }
}
