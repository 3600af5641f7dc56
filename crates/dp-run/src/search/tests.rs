use super::*;
use dp_accounting::{Guarantee, PrivacyLedger};
use dp_engine::prelude::{Gaussian, Unperturbed};

/// The private training set's size.
const N: usize = 10_000;

fn settings() -> SearchSettings {
    SearchSettings {
        repetitions: Repetitions::TruncatedNegativeBinomial { shape: 1.0, mean: 8.0 },
        target_epsilon: 2.0,
        delta: 1e-5,
        score: Score::Private { noise_multiplier: 20.0, held_out: 1000 },
        seed: Some(11),
    }
}

/// Every configuration: lots of 100 from N for 3 epochs (q = 0.01, 300 steps).
fn privacy(_: &u32) -> Result<PrivacyConfig> {
    Ok(PrivacyConfig::new(Gaussian).with_lot_size(100).with_epochs(3.0))
}

/// The ledger of a run that did what candidate `c` was handed.
fn ran(c: &Candidate<'_, u32>) -> RunReport {
    let s = &c.privacy.settings;
    let q = s.lot_size as f64 / N as f64;
    RunReport::recorded(PrivacyLedger::homogeneous(c.noise_multiplier, q, s.planned_steps(N).unwrap()).unwrap())
}

/// A candidate of configuration c: 100 c correct predictions of 1000.
fn trained(c: &Candidate<'_, u32>) -> Result<Trained<u32>> {
    Ok(Trained { value: *c.config, run: ran(c), correct: 100 * *c.config as usize, evaluated: 1000 })
}

#[test]
fn the_best_candidate_comes_back_with_the_searchs_certified_epsilon() {
    let configs: Vec<u32> = (0..6).collect();
    let tmp = tempfile::tempdir().unwrap();
    let journal = Journal::create(tmp.path().join("s")).unwrap();
    let mut seen = Vec::new();
    let out = search(&configs, privacy, N, &settings(), &journal, |c| {
        seen.push((*c.config, c.noise_multiplier));
        assert_eq!(c.privacy.settings.noise, Some(dp_engine::privacy::NoiseLevel::Multiplier(c.noise_multiplier)));
        trained(&c)
    })
    .unwrap();
    assert!(out.privacy.epsilon <= 2.0 && out.privacy.guarantee == Guarantee::Certified);
    let (config, value, score) = out.chosen.expect("K >= 1 for a truncated negative binomial");
    let best_seen = seen.iter().map(|(c, _)| *c).max().unwrap();
    assert_eq!((config, value), (best_seen, best_seen), "scores 0.1 apart, noise 0.02: the best wins");
    assert!((score - 0.1 * f64::from(best_seen)).abs() < 0.1, "within 5 sigma");
    assert_ne!(score, 0.1 * f64::from(best_seen), "the score released is noisy");
    assert!(seen.iter().all(|(_, z)| (z - seen[0].1).abs() < 1e-12), "one shape, one noise multiplier");
    // The search's epsilon recomputed from what the candidates' runs recorded (one shape:
    // the candidate's event is its training and its score's release).
    let ledger =
        ran(&Candidate { config: &0, privacy: privacy(&0).unwrap(), noise_multiplier: seen[0].1, name: "", draw: 0 })
            .ledger()
            .clone();
    let candidate = DpEvent::Composed { events: vec![ledger.event(), DpEvent::Gaussian { noise_multiplier: 20.0 }] };
    let again = dp_accounting::search::search_privacy(candidate, settings().repetitions, 1e-5).unwrap();
    assert!((again.epsilon - out.privacy.epsilon).abs() < 1e-9, "{again} vs {}", out.privacy);
    // Hostile: an empty space; a budget the scores alone exceed; a score over another count.
    let dir = |name: &str| Journal::create(tmp.path().join(name)).unwrap();
    let never = |_: Candidate<'_, u32>| -> Result<Trained<u32>> { unreachable!("no candidate trains") };
    assert!(search(&[] as &[u32], privacy, N, &settings(), &dir("a"), never).is_err());
    let tight = SearchSettings { target_epsilon: 0.05, ..settings() };
    let err = search(&configs, privacy, N, &tight, &dir("b"), never).unwrap_err().to_string();
    assert!(err.contains("too small"), "{err}");
    let wrong = |c: Candidate<'_, u32>| Ok(Trained { value: *c.config, run: ran(&c), correct: 1, evaluated: 10 });
    assert!(search(&configs, privacy, N, &settings(), &dir("c"), wrong).is_err());
}

#[test]
fn a_candidate_that_ran_otherwise_than_accounted_stops_the_search_before_its_score_is_used() {
    let configs: Vec<u32> = (0..6).collect();
    let tmp = tempfile::tempdir().unwrap();
    // Each a run that recorded other releases than those handed to it (by z).
    type Recorded = fn(f64) -> PrivacyLedger;
    let cheats: [(&str, Recorded, &str); 4] = [
        ("steps", |z| PrivacyLedger::homogeneous(z, 0.01, 900).unwrap(), "900 steps"),
        ("rate", |z| PrivacyLedger::homogeneous(z, 0.02, 150).unwrap(), "sampling rate 0.02"),
        ("noise", |z| PrivacyLedger::homogeneous(z * 0.9, 0.01, 300).unwrap(), "noise multiplier"),
        (
            "shuffled",
            |z| {
                let mut l = PrivacyLedger::new();
                l.record_event(DpEvent::sampled_gaussian(z, 0.01, LotSampling::Shuffled).unwrap(), 300).unwrap();
                l
            },
            "a shuffled release",
        ),
    ];
    for (name, ledger, why) in cheats {
        let journal = Journal::create(tmp.path().join(name)).unwrap();
        let err = search(&configs, privacy, N, &settings(), &journal, |c| {
            Ok(Trained {
                value: 0u32,
                run: RunReport::recorded(ledger(c.noise_multiplier)),
                correct: 1000,
                evaluated: 1000,
            })
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains(why) && err.contains("does not cover it"), "{name}: {err}");
        assert!(journal.load::<u32>().unwrap().unwrap().best.is_none(), "{name}: no score was used");
    }
}

#[test]
fn a_space_that_is_not_poisson_sampled_gaussian_is_refused_before_anything_trains() {
    let tmp = tempfile::tempdir().unwrap();
    let never = |_: Candidate<'_, u32>| -> Result<Trained<u32>> { unreachable!("no candidate trains") };
    let refused = |name: &str, privacy: fn(&u32) -> Result<PrivacyConfig>, why: &str| {
        let journal = Journal::create(tmp.path().join(name)).unwrap();
        let err = search(&[0u32, 1], privacy, N, &settings(), &journal, never).unwrap_err().to_string();
        assert!(err.contains(why), "{name}: {err}");
        assert!(journal.load::<u32>().unwrap().is_none(), "{name}: no plan drawn");
    };
    refused("none", |c| Ok(if *c == 1 { PrivacyConfig::new(Unperturbed) } else { privacy(c)? }), "non-private");
    refused(
        "shuffled",
        |c| Ok(privacy(c)?.with_sampling(LotSampling::Shuffled)),
        "configuration 0 (gaussian on shuffled lots) releases a shuffled step",
    );
    refused("lots", |c| Ok(privacy(c)?.with_lot_size(N + 1)), "10001 exceeds the 10000 training examples");
}

#[test]
fn an_interrupted_search_resumes_its_plan_and_never_reruns_a_finished_candidate() {
    let configs: Vec<u32> = (0..6).collect();
    let tmp = tempfile::tempdir().unwrap();
    let whole =
        search(&configs, privacy, N, &settings(), &Journal::create(tmp.path().join("whole")).unwrap(), |c| trained(&c))
            .unwrap();
    let mut names = Vec::new();
    let dir = tmp.path().join("stopped");
    let journal = Journal::create(&dir).unwrap();
    let stopped = search(&configs, privacy, N, &settings(), &journal, |c| {
        names.push((c.name.to_string(), *c.config, c.draw));
        match names.len() {
            3 => Err(EngineError::Interrupted("the third candidate".into())),
            _ => trained(&c),
        }
    });
    assert!(matches!(stopped, Err(EngineError::Interrupted(_))));
    let journal = Journal::open(&dir).unwrap();
    let mut resumed_names = Vec::new();
    let resumed = search(&configs, privacy, N, &settings(), &journal, |c| {
        resumed_names.push((c.name.to_string(), *c.config, c.draw));
        trained(&c)
    })
    .unwrap();
    assert_eq!(resumed_names[0], names[2], "the interrupted candidate continues, with its name and draws");
    assert!(resumed_names[1..].iter().all(|n| !names.contains(n)), "no finished candidate reruns");
    let (a, b) = (whole.chosen.unwrap(), resumed.chosen.unwrap());
    assert_eq!((a.0, a.1, a.2, whole.privacy.epsilon), (b.0, b.1, b.2, resumed.privacy.epsilon));
    // Resumed with other settings, another space or another training set: refused (the
    // plan and the noise were drawn for these).
    let other = SearchSettings { target_epsilon: 3.0, ..settings() };
    let err = search(&configs, privacy, N, &other, &journal, trained_by_value).unwrap_err().to_string();
    assert!(err.contains("another space or other settings"), "{err}");
    assert!(search(&configs[..5], privacy, N, &settings(), &journal, trained_by_value).is_err());
    assert!(search(&configs, privacy, N / 2, &settings(), &journal, trained_by_value).is_err());
    // Its state deleted: the candidates' folders remain, and no new plan is drawn over them.
    std::fs::create_dir(dir.join(&names[0].0)).unwrap();
    std::fs::remove_file(dir.join(journal::STATE_FILE)).unwrap();
    let err = search(&configs, privacy, N, &settings(), &journal, trained_by_value).unwrap_err().to_string();
    assert!(err.contains("not its state") && err.contains("spend it again"), "{err}");
    assert!(journal.load::<u32>().unwrap().is_none());
}

fn trained_by_value(c: Candidate<'_, u32>) -> Result<Trained<u32>> {
    trained(&c)
}
