//! The search's RDP (Papernot & Steinke's Theorems 2 and 6) against Google's dp_accounting:
//! 80 cases at integer orders (four candidate trainings, shapes 0, 0.5, 1, 2 and Poisson, means 1 to 100; provenance
//! in tests/data/repeat_and_select.json). The transform alone on dp_accounting's own candidate
//! curve, then end to end from this crate's candidate curve to the epsilon; then the labels the
//! accountants give a ledger holding a search.

use dp_accounting::rdp::{Conversion, subsampled_gaussian_rdp};
use dp_accounting::repeat_and_select::{Repetitions, repeated_rdp};
use dp_accounting::{Accountant, DpEvent, Guarantee, LotSampling, PrivacyLedger, PrvAccountant, RdpAccountant};
use serde_json::Value;

/// The reference file.
fn reference() -> Value {
    serde_json::from_str(include_str!("data/repeat_and_select.json")).unwrap()
}

/// A JSON number, or "inf".
fn number(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| if v == "inf" { f64::INFINITY } else { panic!("{v} is not a number") })
}

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(number).collect()
}

/// The case's distribution of the number of candidates.
fn repetitions(case: &Value) -> Repetitions {
    let mean = number(&case["mean"]);
    match number(&case["shape"]) {
        shape if shape.is_infinite() => Repetitions::Poisson { mean },
        shape => Repetitions::TruncatedNegativeBinomial { shape, mean },
    }
}

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got.is_infinite() && want.is_infinite()) || (got - want).abs() <= rel * want.abs().max(1e-12)
}

/// dp_accounting's epsilon of an RDP curve (Proposition 12 of Canonne, Kamath and Steinke, with
/// the KL bound at small RDP), over its orders.
fn epsilon(orders: &[f64], rdp: &[f64], delta: f64) -> f64 {
    orders
        .iter()
        .zip(rdp)
        .map(|(&a, &r)| {
            if delta * delta + (-r).exp_m1() > 0.0 {
                0.0
            } else if a > 1.01 {
                Conversion::Balle2020.epsilon(a, r, delta)
            } else {
                f64::INFINITY
            }
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn the_search_rdp_is_dp_accountings_at_every_order() {
    let r = reference();
    let orders = numbers(&r["orders"]);
    let cases = r["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 80);
    for case in cases {
        let got = repeated_rdp(&orders, &numbers(&case["candidate_rdp"]), repetitions(case)).unwrap();
        for ((a, g), w) in orders.iter().zip(&got).zip(numbers(&case["rdp"])) {
            assert!(close(*g, w, 1e-6), "order {a}: {g} against {w} ({case:.80})");
        }
    }
}

#[test]
fn from_one_training_to_the_searchs_epsilon_as_dp_accounting() {
    let r = reference();
    let (orders, delta) = (numbers(&r["orders"]), number(&r["delta"]));
    for case in r["cases"].as_array().unwrap() {
        let (z, q, steps) = (number(&case["noise_multiplier"]), number(&case["sample_rate"]), number(&case["steps"]));
        let one: Vec<f64> = orders.iter().map(|&a| steps * subsampled_gaussian_rdp(q, z, a).unwrap()).collect();
        for (g, w) in one.iter().zip(numbers(&case["candidate_rdp"])) {
            assert!(close(*g, w, 1e-6), "candidate {g} against {w}");
        }
        let search = repeated_rdp(&orders, &one, repetitions(case)).unwrap();
        let (got, want) = (epsilon(&orders, &search, delta), number(&case["epsilon"]));
        assert!(
            close(got, want, 1e-6),
            "epsilon {got} against {want} (z {z}, q {q}, {steps} steps, {:?})",
            repetitions(case)
        );
        assert!(got >= number(&case["candidate_epsilon"]) * (1.0 - 1e-9), "a search costs at least one candidate");
    }
}

/// A ledger of one search over candidates of `candidate`.
fn search_of(candidate: DpEvent) -> PrivacyLedger {
    let search = DpEvent::RepeatAndSelect {
        repetitions: Repetitions::TruncatedNegativeBinomial { shape: 1.0, mean: 5.0 },
        of: Box::new(candidate),
    };
    let mut ledger = PrivacyLedger::new();
    ledger.record_event(search, 1).unwrap();
    ledger
}

#[test]
fn a_search_is_certified_by_rdp_only_when_its_candidates_are() {
    let training = DpEvent::sampled_gaussian(1.0, 0.01, LotSampling::Poisson).unwrap().repeated(1000).unwrap();
    let rdp = RdpAccountant::default();
    let report = rdp.epsilon(&search_of(training.clone()), 1e-5).unwrap();
    assert_eq!(report.guarantee, Guarantee::Certified);
    let alone = rdp.epsilon(&PrivacyLedger::homogeneous(1.0, 0.01, 1000).unwrap(), 1e-5).unwrap();
    assert!(report.epsilon > alone.epsilon && report.epsilon < 3.0 * alone.epsilon, "{report} vs {alone}");
    // Candidates chosen by looking at the others' scores, or shuffled lots: no guarantee.
    let adaptive = DpEvent::Composed {
        events: vec![training.clone(), DpEvent::Unaccounted { what: "the grid chosen from earlier scores".into() }],
    };
    assert_eq!(rdp.epsilon(&search_of(adaptive), 1e-5).unwrap().guarantee, Guarantee::None);
    let shuffled = DpEvent::sampled_gaussian(1.0, 0.01, LotSampling::Shuffled).unwrap().repeated(10).unwrap();
    assert_eq!(rdp.epsilon(&search_of(shuffled), 1e-5).unwrap().guarantee, Guarantee::None);
    // A candidate without privacy: infinite.
    let open = rdp.epsilon(&search_of(DpEvent::NonPrivate { what: "a baseline".into() }), 1e-5).unwrap();
    assert!(open.epsilon.is_infinite());
    // The PRV accountant has no theorem for it: one line, not a number.
    let err = PrvAccountant::default().epsilon(&search_of(training), 1e-5).unwrap_err().to_string();
    assert!(err.contains("repeat-and-select") && err.lines().count() == 1, "{err}");
}

#[test]
fn a_damaged_search_in_a_ledger_is_refused_on_load() {
    let ledger = search_of(DpEvent::sampled_gaussian(1.0, 0.01, LotSampling::Poisson).unwrap());
    let json = serde_json::to_string(&ledger).unwrap();
    assert_eq!(serde_json::from_str::<PrivacyLedger>(&json).unwrap(), ledger);
    let bad = json.replace("\"mean\":5.0", "\"mean\":0.5");
    assert_ne!(bad, json);
    assert!(serde_json::from_str::<PrivacyLedger>(&bad).is_err(), "{bad}");
}
