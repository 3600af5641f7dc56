//! `dptrain tune` end to end on a tiny dataset: the search's epsilon at most its target and
//! certified, only the chosen candidate released (its configuration, noisy score, test accuracy
//! and model file, nothing of the others, no count of them printed), its private folder gone, a
//! seeded search reproducible, an interrupted (Ctrl-C) or killed (SIGKILL) search resumed to
//! the uninterrupted one's release, and the hostile cases one line each.

use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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
    // Kept on request, with the warning.
    let kept = tmp.path().join("kept");
    let run = tune(&s, &kept, &["--target-epsilon", "4", "--candidates", "3", "--seed", "1", "--keep-state"]);
    assert!(String::from_utf8_lossy(&run.stderr).contains("voids the search's bound"));
    assert!(kept.join("search-state/search.json").exists() && kept.join("chosen/checkpoint.bin").exists());
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

#[test]
fn a_space_whose_candidates_would_not_be_what_the_search_accounts_is_refused_before_training() {
    let (tmp, data) = temp_with_dataset(400);
    for (lists, why) in [
        (
            "learning_rate = [0.5]\nmechanism = [\"gaussian\", \"none\"]",
            "(none on Poisson-sampled lots) releases a non-private step",
        ),
        ("learning_rate = [0.5]\nsampling = [\"shuffled\"]", "(gaussian on shuffled lots) releases a shuffled step"),
        ("learning_rate = [0.5]\nmechanism = [\"optimized-paper\"]", "optimized-paper"),
    ] {
        let out = tmp.path().join("o");
        one_line_error(
            &tune(&space(tmp.path(), &data, lists), &out, &["--target-epsilon", "2", "--candidates", "3"]),
            why,
        );
        assert!(!out.join("search-state/search.json").exists(), "{lists}: no plan drawn, nothing trained");
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn nothing_a_search_prints_or_leaves_tells_its_number_of_candidates() {
    let (tmp, data) = temp_with_dataset(300);
    // ScatterNet features (no cache: computed by every search) are computed once, before any
    // candidate, whatever K is.
    let text = format!(
        "[base]\nmodel = \"scatnet-linear\"\ndata_dir = \"{}\"\nvalidation = 100\nepochs = 1.0\nlot_size = 50\n[space]\nlearning_rate = [0.5, 1.0, 2.0]\n",
        data.display()
    );
    let space = tmp.path().join("space.toml");
    std::fs::write(&space, text).unwrap();
    let search = |seed: u64, keep: bool| {
        let out = tmp.path().join(format!("s{seed}-{keep}"));
        let cache = tmp.path().join(format!("cache{seed}-{keep}"));
        let mut args = vec!["tune", "--space", space.to_str().unwrap(), "--device", "cpu", "--score-noise", "5"];
        let (seed_text, out_text) = (seed.to_string(), out.to_str().unwrap().to_string());
        args.extend(["--target-epsilon", "4", "--candidates", "3", "--seed", &seed_text, "--json"]);
        args.extend(["--out-dir", &out_text]);
        if keep {
            args.push("--keep-state");
        }
        let run = Command::new(binary()).args(&args).env("DPTRAIN_CACHE_DIR", &cache).output().unwrap();
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        (run, out)
    };
    // K of a seed, as only the kept state shows it.
    let k = |seed: u64| {
        let (_, out) = search(seed, true);
        std::fs::read_dir(out.join("search-state")).unwrap().flatten().filter(|e| e.path().is_dir()).count()
    };
    let first = k(1);
    let (other, k_other) = (2..12).map(|s| (s, k(s))).find(|(_, k)| *k != first).expect("a seed with another K");
    let names = |out: &Path| -> Vec<String> {
        let mut all = Vec::new();
        for dir in [out.to_path_buf(), out.join("chosen")] {
            all.extend(std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()));
        }
        all.sort();
        all
    };
    let ((a, out_a), (b, out_b)) = (search(1, false), search(other, false));
    // The elapsed time ("[7 s]") is the one difference allowed: the search's duration says
    // roughly how many candidates ran, and the theorem bounds what is released, not timing.
    let untimed = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes).into_owned();
        text.split('[').map(|part| part.split_once(" s]").map_or(part, |(_, rest)| rest)).collect::<Vec<_>>().join("[")
    };
    assert_eq!(untimed(&a.stderr), untimed(&b.stderr), "K = {first} and {k_other}: the same bytes on stderr");
    let printed = String::from_utf8_lossy(&a.stderr);
    let told = printed.matches("ScatterNet").count();
    assert!((1..=3).contains(&told), "the features once (training, held-out and test sets): {printed}");
    let release = |run: &std::process::Output| {
        let mut r: Value = serde_json::from_slice(&run.stdout).unwrap();
        for key in ["chosen", "validation_score", "test_accuracy", "run_dir"] {
            r.as_object_mut().unwrap().remove(key);
        }
        r
    };
    assert_eq!(release(&a), release(&b), "the same report apart from the chosen model and its score");
    assert_eq!(names(&out_a), names(&out_b), "the same files left");
}

/// A search of 4 candidates (seed 2) on `data` into `tmp/o`, killed once a candidate wrote a
/// checkpoint: its space file and folder.
fn killed_search(tmp: &Path, data: &Path) -> (String, std::path::PathBuf) {
    let s = space(tmp, data, "learning_rate = [0.5, 1.0]\nepochs = [15.0]");
    let out = tmp.join("o");
    let o = out.to_str().unwrap();
    let args =
        ["tune", "--space", &s, "--device", "cpu", "--out-dir", o, "--score-noise", "5", "--target-epsilon", "4"];
    let stop = stopped(&[&args[..], &["--candidates", "4", "--seed", "2"]].concat(), &out, "-KILL");
    assert!(!stop.status.success());
    (s, out)
}

#[test]
fn a_search_whose_state_was_deleted_is_not_started_again_over_its_candidates() {
    let (tmp, data) = temp_with_dataset(400);
    let (s, out) = killed_search(tmp.path(), &data);
    std::fs::remove_file(out.join("search-state/search.json")).unwrap();
    let resume = tune(&s, &out, &["--target-epsilon", "4", "--resume", "--candidates", "4", "--seed", "2"]);
    one_line_error(&resume, "not its state");
    assert!(!out.join("search-state/search.json").exists(), "no new plan drawn");
}

#[test]
fn a_search_resumed_on_other_training_data_is_refused() {
    let (tmp, data) = temp_with_dataset(400);
    let (s, out) = killed_search(tmp.path(), &data);
    // As many training images, other ones: the plan was drawn for the data it was drawn on.
    images(&data, "train", 400, 28, 28, 7);
    let resume = tune(&s, &out, &["--target-epsilon", "4", "--resume", "--candidates", "4", "--seed", "2"]);
    one_line_error(&resume, "another space or other settings");
}

/// What two runs of one seeded search must release alike.
fn released(out: &Path) -> Value {
    let r: Value = serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    serde_json::json!([r["chosen"], r["validation_score"], r["test_accuracy"], r["epsilon"], r["guarantee"]])
}

/// Starts the search of `args` into `out` and sends `signal` once a candidate has written its
/// first checkpoint; gives the process's output.
fn stopped(args: &[&str], out: &Path, signal: &str) -> std::process::Output {
    let child = Command::new(binary()).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let checkpointed = || {
        std::fs::read_dir(out.join("search-state"))
            .map(|d| d.flatten().any(|e| e.path().join("checkpoint.bin").exists()))
            .unwrap_or(false)
    };
    while !checkpointed() {
        assert!(Instant::now() < deadline, "no candidate started");
        std::thread::sleep(Duration::from_millis(2));
    }
    Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn a_stopped_search_resumes_to_the_uninterrupted_release() {
    let (tmp, data) = temp_with_dataset(400);
    let s = space(
        tmp.path(),
        &data,
        "learning_rate = { low = 0.25, high = 2.0, scale = \"log\" }\nlot_size = [25, 50]\nepochs = [15.0]",
    );
    let args = |out: &Path| {
        let o = out.to_str().unwrap().to_string();
        ["tune", "--space", &s, "--device", "cpu", "--out-dir", &o, "--score-noise", "5", "--target-epsilon", "4"]
            .into_iter()
            .map(String::from)
            .chain(["--candidates", "3", "--seed", "4"].map(String::from))
            .collect::<Vec<_>>()
    };
    let run = |out: &Path, extra: &[&str]| {
        let a = args(out);
        dptrain(&[a.iter().map(String::as_str).collect::<Vec<_>>(), extra.to_vec()].concat())
    };
    let whole = tmp.path().join("whole");
    assert!(run(&whole, &[]).status.success());
    let lr = released(&whole)[0]["learning_rate"].as_f64().unwrap();
    assert!((0.25..=2.0).contains(&lr) && lr != 0.25 && lr != 2.0, "drawn in the range: {lr}");
    for signal in ["-INT", "-KILL"] {
        let out = tmp.path().join(&signal[1..]);
        let a = args(&out);
        let stop = stopped(&a.iter().map(String::as_str).collect::<Vec<_>>(), &out, signal);
        assert!(!stop.status.success() && !out.join("report.json").exists(), "{signal}: stopped mid-search");
        if signal == "-INT" {
            assert_eq!(stop.status.code(), Some(130));
            let stderr = String::from_utf8_lossy(&stop.stderr);
            assert!(stderr.trim().lines().last().unwrap().contains("dptrain tune --resume"), "{stderr}");
        }
        // Not without --resume: a rerun would spend the data's privacy twice.
        one_line_error(&run(&out, &[]), "give --resume");
        let resumed = run(&out, &["--resume"]);
        assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
        assert_eq!(released(&out), released(&whole), "{signal}: the uninterrupted search's release");
        assert!(!out.join("search-state").exists());
        let chosen: Vec<_> = std::fs::read_dir(out.join("chosen")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(chosen, ["checkpoint.bin"], "the model only, no key file");
        one_line_error(&run(&out, &["--resume"]), "complete search");
    }
}

#[test]
fn a_resumed_search_refuses_an_edited_state_and_other_settings() {
    let (tmp, data) = temp_with_dataset(400);
    let s = space(tmp.path(), &data, "learning_rate = [0.5, 1.0]\nepochs = [15.0]");
    let out = tmp.path().join("o");
    one_line_error(&tune(&s, &out, &["--target-epsilon", "4", "--resume"]), "holds no search to resume");
    let o = out.to_str().unwrap();
    let args =
        ["tune", "--space", &s, "--device", "cpu", "--out-dir", o, "--score-noise", "5", "--target-epsilon", "4"];
    let stop = stopped(&[&args[..], &["--candidates", "4", "--seed", "2"]].concat(), &out, "-KILL");
    assert!(!stop.status.success());
    let resume = |extra: &[&str]| tune(&s, &out, &[&["--target-epsilon", "4", "--resume"][..], extra].concat());
    one_line_error(&resume(&["--candidates", "4", "--seed", "3"]), "another space or other settings");
    let state = out.join("search-state/search.json");
    let text = std::fs::read_to_string(&state).unwrap();
    std::fs::write(&state, text.replacen("\"done\":0", "\"done\":1", 1).replacen("\"draw\":", "\"draw\":1", 1))
        .unwrap();
    one_line_error(&resume(&["--candidates", "4", "--seed", "2"]), "seal does not verify");
}

#[test]
fn a_search_resumed_on_other_held_out_or_test_examples_is_refused() {
    let (tmp, data) = temp_with_dataset(400);
    let (s, out) = killed_search(tmp.path(), &data);
    let resume = || tune(&s, &out, &["--target-epsilon", "4", "--resume", "--candidates", "4", "--seed", "2"]);
    // The 100 held-out examples' labels rotated (the training part unchanged), then the test set's.
    for labels in ["train-labels-idx1-ubyte", "t10k-labels-idx1-ubyte"] {
        let path = data.join(labels);
        let whole = std::fs::read(&path).unwrap();
        let mut rotated = whole.clone();
        let n = rotated.len();
        rotated[n - 40..].iter_mut().for_each(|l| *l = (*l + 1) % 10);
        std::fs::write(&path, &rotated).unwrap();
        one_line_error(&resume(), "another space or other settings");
        std::fs::write(&path, &whole).unwrap();
    }
}

#[test]
fn a_search_whose_state_was_deleted_and_its_candidates_linked_back_is_refused() {
    let (tmp, data) = temp_with_dataset(400);
    let (s, out) = killed_search(tmp.path(), &data);
    let state = out.join("search-state");
    std::fs::remove_file(state.join("search.json")).unwrap();
    let moved = tmp.path().join("moved");
    std::fs::create_dir(&moved).unwrap();
    for entry in std::fs::read_dir(&state).unwrap().flatten().filter(|e| e.path().is_dir()) {
        let to = moved.join(entry.file_name());
        std::fs::rename(entry.path(), &to).unwrap();
        std::os::unix::fs::symlink(&to, entry.path()).unwrap();
    }
    let resume = tune(&s, &out, &["--target-epsilon", "4", "--resume", "--candidates", "4", "--seed", "2"]);
    one_line_error(&resume, "not its state");
    assert!(!state.join("search.json").exists(), "no new plan drawn");
}

#[test]
fn a_search_and_a_training_run_never_share_a_folder() {
    let (tmp, data) = temp_with_dataset(400);
    let (s, out) = killed_search(tmp.path(), &data);
    let d = data.to_str().unwrap();
    // A run in a stopped search's folder: refused, and the search's files left alone.
    let run = dptrain(&[&base_args(d, out.to_str().unwrap())[..], &["--noise-multiplier", "1"]].concat());
    one_line_error(&run, "holds a search (search-state/)");
    assert!(!out.join("report.json").exists() && !out.join("config.toml").exists());
    // A search in a run's folder: refused.
    let trained = tmp.path().join("trained");
    assert!(
        dptrain(&[&base_args(d, trained.to_str().unwrap())[..], &["--noise-multiplier", "1"]].concat())
            .status
            .success()
    );
    one_line_error(&tune(&s, &trained, &["--target-epsilon", "4"]), "holds a training run");
    // A search refused before it drew its plan spent nothing: the next one there is not blocked.
    let fresh = tmp.path().join("fresh");
    let missing = space(tmp.path(), &tmp.path().join("no-such-data"), "learning_rate = [0.5]");
    assert!(!tune(&missing, &fresh, &["--target-epsilon", "4"]).status.success());
    let again = tune(&s, &fresh, &["--target-epsilon", "4", "--candidates", "1", "--seed", "3"]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
}

#[test]
fn a_space_of_other_data_folders_is_refused() {
    let (tmp, data) = temp_with_dataset(400);
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    tiny_dataset(&other, 400);
    let lists = format!("learning_rate = [0.5]\ndata_dir = [\"{}\", \"{}\"]", data.display(), other.display());
    let s = space(tmp.path(), &data, &lists);
    one_line_error(&tune(&s, &tmp.path().join("o"), &["--target-epsilon", "4"]), "`data_dir`");
}

#[test]
fn a_search_started_from_a_models_weights_reports_where_they_came_from() {
    let (tmp, data) = temp_with_dataset(400);
    let d = data.to_str().unwrap();
    let base = tmp.path().join("base");
    assert!(dptrain(&[&base_args(d, base.to_str().unwrap())[..], &["--mechanism", "none"]].concat()).status.success());
    let model = base.join("model.safetensors");
    let path = tmp.path().join("space.toml");
    let text = format!(
        "[base]\nmodel = \"logreg\"\ndata_dir = \"{d}\"\nvalidation = 100\nepochs = 2.0\ndevice = \"cpu\"\ninit_from = \"{}\"\n[space]\nlearning_rate = [0.5, 1.0]\n",
        model.display()
    );
    std::fs::write(&path, text).unwrap();
    let out = tmp.path().join("o");
    let run = tune(path.to_str().unwrap(), &out, &["--target-epsilon", "4", "--candidates", "2", "--seed", "1"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("note: initial weights from") && stdout.contains("spends it again"), "{stdout}");
    let r: Value = serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(r["initial_weights"]["report"]["mechanism"], "none", "{r}");
    assert!(r["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("initial weights from")));
}
