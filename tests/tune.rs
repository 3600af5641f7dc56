//! `dptrain tune` end to end on a tiny dataset: the search's epsilon at most its target and
//! certified, only the chosen candidate released (its configuration, noisy score, test accuracy
//! and model file, nothing of the others, no count of them printed), its private folder gone, a
//! seeded search reproducible, and the hostile cases one line each.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A space over `data`: logistic regression, 100 held-out examples, two learning rates and two
/// lot sizes.
fn space(dir: &Path, data: &Path, lists: &str) -> String {
    // A file of its own per space: a test holds several at once.
    static SPACES: AtomicUsize = AtomicUsize::new(0);
    let path = dir.join(format!("space-{}.toml", SPACES.fetch_add(1, Ordering::SeqCst)));
    let text = format!(
        "[base]\nmodel = \"logreg\"\ndata_dir = \"{}\"\nvalidation = 100\nepochs = 2.0\ndevice = \"cpu\"\n[space]\n{lists}\n",
        data.display()
    );
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn tune(space: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    let o = out.to_str().unwrap();
    let base = ["tune", "--space", space, "--device", "cpu", "--out-dir", o, "--score-noise", "5"];
    dptrain(&[&base[..], extra].concat())
}

#[test]
fn a_search_releases_only_its_chosen_candidate_with_its_whole_epsilon() {
    let (tmp, data) = temp_with_dataset(400);
    let s = space(tmp.path(), &data, "learning_rate = [0.5, 1.0]\nlot_size = [50, 100]");
    let out = tmp.path().join("search");
    let run = tune(&s, &out, &["--target-epsilon", "4", "--candidates", "3", "--seed", "1", "--json"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let report: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert!(report["epsilon"].as_f64().unwrap() <= 4.0 && report["guarantee"] == "certified", "{report}");
    assert!(report["chosen"]["learning_rate"].is_f64() && report["chosen"]["seed"].is_null());
    let score = report["validation_score"].as_f64().unwrap();
    assert!(score > 0.0 && score * 100.0 != (score * 100.0).round(), "a noisy score, not a count: {score}");
    assert!(report["test_accuracy"].as_f64().unwrap() > 0.0);
    let files: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(files.len(), 2, "report.json and chosen/ only: {files:?}");
    let chosen: Vec<_> = std::fs::read_dir(out.join("chosen")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(chosen, ["checkpoint.bin"], "the model only");
    let printed = [run.stdout, run.stderr].concat();
    assert!(!String::from_utf8_lossy(&printed).contains("candidate-"), "nothing names the other candidates");
    // Seeded: the same choice and score again.
    let again =
        tune(&s, &tmp.path().join("again"), &["--target-epsilon", "4", "--candidates", "3", "--seed", "1", "--json"]);
    let again: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!((&again["chosen"], &again["validation_score"]), (&report["chosen"], &report["validation_score"]));
    // The folder holds a search: refused until --overwrite (a rerun would spend twice).
    one_line_error(&tune(&s, &out, &["--target-epsilon", "4"]), "holds another search");
}

#[test]
fn hostile_searches_are_one_line_errors() {
    let (tmp, data) = temp_with_dataset(400);
    let s = space(tmp.path(), &data, "learning_rate = [0.5]");
    let out = tmp.path().join("o");
    one_line_error(&tune(&s, &out, &["--target-epsilon", "0.05"]), "too small for this search");
    one_line_error(&tune(&s, &out, &["--target-epsilon", "3", "--candidates", "1e9"]), "mean number of candidates");
    one_line_error(&tune(&s, &out, &["--target-epsilon", "3", "--distribution", "uniform"]), "geometric");
    let empty = space(tmp.path(), &data, "learning_rate = []");
    one_line_error(&tune(&empty, &out, &["--target-epsilon", "3"]), "non-empty list");
    let unknown = space(tmp.path(), &data, "learning_rat = [1.0]");
    one_line_error(&tune(&unknown, &out, &["--target-epsilon", "3"]), "learning_rat");
    // A link planted where the search keeps its private state: never followed.
    let planted = tmp.path().join("planted");
    std::fs::create_dir_all(tmp.path().join("p")).unwrap();
    std::fs::write(tmp.path().join("p/keep"), b"not the search's").unwrap();
    std::fs::create_dir_all(&planted).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("p"), planted.join("search-state")).unwrap();
    one_line_error(&tune(&s, &planted, &["--target-epsilon", "3"]), "holds another search");
    let replaced = tune(&s, &planted, &["--target-epsilon", "4", "--candidates", "1", "--overwrite"]);
    assert!(replaced.status.success(), "{}", String::from_utf8_lossy(&replaced.stderr));
    assert!(tmp.path().join("p/keep").exists(), "the link was removed, not what it points to");
    let huge = space(
        tmp.path(),
        &data,
        &(0..5).map(|i| format!("k{i} = [{}]", vec!["1"; 20].join(","))).collect::<Vec<_>>().join("\n"),
    );
    one_line_error(&tune(&huge, &out, &["--target-epsilon", "3"]), "configurations");
}
