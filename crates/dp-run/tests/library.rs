//! The library with real runs. The accounted search (the example's candidates): its epsilon
//! equals the one recomputed from the ledgers its candidates' runs recorded, and a candidate that
//! trains other than the privacy it was handed (here three times the epochs) stops the search
//! before its score is used. `auto`: a device that opens but fails its smoke run is passed over
//! with one line, and the run completes on the next, its report saying why.

#[path = "../examples/accounted_search.rs"]
#[allow(dead_code)]
mod example;

use burn::optim::SgdConfig;
use dp_accounting::repeat_and_select::Repetitions;
use dp_accounting::search::search_privacy;
use dp_accounting::{DpEvent, Guarantee, PrivacyLedger};
use dp_engine::backend::{AutoCandidate, auto, cpu};
use dp_engine::lots::image_accuracy;
use dp_engine::selftest::{Tap, smoke_run};
use dp_run::prelude::*;
use dp_run::search::{Journal, Score, SearchSettings, search};
use example::resumable;
use std::sync::atomic::AtomicBool;

static NEVER: AtomicBool = AtomicBool::new(false);

/// Learning rates at one lot size: every candidate one training shape.
const GRID: [(f64, usize); 3] = [(0.1, 100), (0.5, 100), (2.0, 100)];

fn settings(seed: u64) -> SearchSettings {
    SearchSettings {
        repetitions: Repetitions::TruncatedNegativeBinomial { shape: 1.0, mean: 3.0 },
        target_epsilon: 2.0,
        delta: 1e-5,
        score: Score::Private { noise_multiplier: 10.0, held_out: 500 },
        seed: Some(seed),
    }
}

#[test]
fn the_searchs_epsilon_is_the_one_its_candidates_ledgers_give() {
    let tmp = tempfile::tempdir().unwrap();
    // A seed that draws K > 1 (K is the number of times the closure is called).
    for seed in 1..20 {
        let journal = Journal::create(tmp.path().join(format!("s{seed}"))).unwrap();
        let mut ledgers: Vec<PrivacyLedger> = Vec::new();
        let out = search(&GRID, example::privacy, example::EXAMPLES, &settings(seed), &journal, |c| {
            let trained = example::candidate(c, &journal, &NEVER)?;
            ledgers.push(trained.run.ledger().clone());
            Ok(trained)
        })
        .unwrap();
        if ledgers.len() < 2 {
            continue;
        }
        assert_eq!(out.privacy.guarantee, Guarantee::Certified);
        assert!(ledgers.iter().all(|l| *l == ledgers[0]), "one shape, one calibrated noise: equal ledgers");
        let candidate =
            DpEvent::Composed { events: vec![ledgers[0].event(), DpEvent::Gaussian { noise_multiplier: 10.0 }] };
        let recomputed = search_privacy(candidate, settings(seed).repetitions, 1e-5).unwrap();
        let close = (recomputed.epsilon - out.privacy.epsilon).abs() <= 1e-12 * out.privacy.epsilon;
        assert!(close, "seed {seed}: {recomputed} vs {}", out.privacy);
        assert!(out.privacy.epsilon <= 2.0);
        return;
    }
    panic!("no seed in 1..20 drew more than one candidate");
}

#[test]
fn a_candidate_that_trains_longer_than_it_was_handed_stops_the_search() {
    let tmp = tempfile::tempdir().unwrap();
    let journal = Journal::create(tmp.path().join("s")).unwrap();
    let err = search(&GRID, example::privacy, example::EXAMPLES, &settings(3), &journal, |mut c| {
        // The user's own settings instead of the search's: three times the epochs accounted.
        c.privacy = c.privacy.with_epochs(6.0);
        example::candidate(c, &journal, &NEVER)
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("120 steps where the search accounted 40") && err.contains("does not cover it"), "{err}");
    assert_eq!(err.lines().count(), 1);
}

/// A device that computes something else: every output it gives is doubled.
struct Off;

impl Tap for Off {
    fn output(&self, _check: &str, values: &mut [f64]) {
        values.iter_mut().for_each(|v| *v *= 2.0);
    }
}

#[test]
fn auto_passes_over_a_device_that_fails_its_smoke_run_and_the_run_completes_on_the_next() {
    // A device that opens (the CPU standing in for a GPU) and then fails its smoke run.
    let planted = AutoCandidate { name: "planted-gpu", open: || Ok(cpu()) };
    let chosen = auto(&[planted], &|d| smoke_run(&d.device, &Off));
    let printed: Vec<String> =
        chosen.tried.iter().filter(|t| t.passed_over()).map(|t| format!("note: {}", t.line())).collect();
    assert_eq!(printed.len(), 1, "{printed:?}");
    assert!(
        printed[0].starts_with("note: device planted-gpu passed over: flex on")
            && printed[0].contains("failed its smoke run: noise"),
        "{}",
        printed[0]
    );
    assert_eq!(chosen.tried.last().map(|t| t.device.as_str()), Some("cpu"));
    // The same device, its outputs untouched, passes and is taken.
    assert_eq!(auto(&[planted], &|d| smoke_run(&d.device, &dp_engine::selftest::Untouched)).tried.len(), 1);

    let tmp = tempfile::tempdir().unwrap();
    let device = chosen.device.clone();
    let (train, test) = (resumable::table(400, 0).unwrap(), resumable::table(100, 400).unwrap());
    let privacy = PrivacyConfig::new(Gaussian).with_noise_multiplier(1.0).with_lot_size(50).with_epochs(1.0);
    let report =
        Run::new(RunFolder::fresh(tmp.path().join("run"), Some(1)).unwrap(), privacy, 0.5, |m: &resumable::LogReg| {
            image_accuracy(m, &test, &device)
        })
        .with_device_choice(chosen.tried.clone())
        .train(resumable::LogReg::new(&device), SgdConfig::new().init(), &CrossEntropyLots { data: &train }, &device)
        .unwrap();
    assert!(report.completed && report.device.starts_with("cpu"), "{}", report.device);
    assert_eq!(report.device_tried, chosen.tried, "the report says what was tried and why");
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("run/report.json")).unwrap()).unwrap();
    assert_eq!(written["device_tried"][0]["device"], "planted-gpu");
}

/// `RunFolder::open` starts a run where the folder holds none, continues one that stopped, and
/// starts afresh once the run completed (its key file gone).
#[test]
fn open_continues_an_unfinished_run_and_only_that() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let device = dp_engine::backend::cpu().device;
    let (train, test) = (resumable::table(400, 0).unwrap(), resumable::table(100, 400).unwrap());
    let run = |stop_after: Option<u64>| {
        let folder = RunFolder::open(&dir, Some(3)).unwrap();
        let resumed = folder.is_resumed();
        let privacy = PrivacyConfig::new(Gaussian).with_noise_multiplier(1.0).with_lot_size(50).with_epochs(1.0);
        let options = RunOptions { stop_after, overwrite: !resumed, ..RunOptions::default() };
        let report = Run::new(folder, privacy, 0.5, |m: &resumable::LogReg| image_accuracy(m, &test, &device))
            .with_options(options)
            .quiet()
            .train(
                resumable::LogReg::new(&device),
                SgdConfig::new().init(),
                &CrossEntropyLots { data: &train },
                &device,
            )
            .unwrap();
        (resumed, report.steps, report.completed)
    };
    assert_eq!(run(Some(3)), (false, 3, false), "a fresh run, stopped after 3 steps");
    assert_eq!(run(None), (true, 8, true), "continued to its 8 planned steps");
    assert!(!RunFolder::open(&dir, Some(3)).unwrap().is_resumed(), "a completed run is not continued");
}
