//! Issue 23: the run folder as a security boundary, end to end. The secrets live in the key
//! file alone and go when the run completes; one process runs in a folder at a time; links and
//! special files planted in the folder are never followed; absurd sizes and counts are one-line
//! errors; long runs say they are alive on a pipe.

use crate::common::*;
use serde_json::Value;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The run's three keys as hex and as bytes.
fn secrets(out: &Path) -> Vec<(String, Vec<u8>)> {
    let keys: Value = serde_json::from_slice(&std::fs::read(out.join("run.key")).unwrap()).unwrap();
    ["sampler_key", "noise_key", "mac_key"]
        .iter()
        .map(|k| {
            let hex = keys[k].as_str().unwrap().to_string();
            let bytes = hex::decode(&hex).unwrap();
            (hex, bytes)
        })
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn the_key_file_holds_the_secrets_and_goes_when_the_run_completes() {
    let (tmp, data) = temp_with_dataset(300);
    let d = data.to_str().unwrap();
    let out = tmp.path().join("run");
    let o = out.to_str().unwrap();
    let run = |extra: &[&str]| dptrain(&[base_args(d, o), vec!["--epochs", "2", "-z", "1.1"], extra.to_vec()].concat());
    assert!(run(&["--stop-after", "3"]).status.success());
    let mode = std::fs::metadata(out.join("run.key")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the key file is the owner's alone");
    let keys = secrets(&out);
    assert_ne!(keys[0].1, keys[1].1, "independent sampler and noise keys");
    for file in ["checkpoint.bin", "config.toml", "report.json"] {
        let bytes = std::fs::read(out.join(file)).unwrap();
        for (hex, raw) in &keys {
            assert!(!contains(&bytes, hex.as_bytes()) && !contains(&bytes, raw), "{file} holds a key");
        }
    }
    // The run completes: the key is removed, the folder cannot be resumed, and says why.
    let resumed = run(&["--resume"]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert!(!out.join("run.key").exists(), "a completed run's key is removed");
    assert!(out.join("checkpoint.bin").exists());
    one_line_error(&run(&["--resume"]), "the run is complete");

    // A seeded run: the seed is kept in the key file, not in config.toml; --keep-key keeps it.
    let seeded = tmp.path().join("seeded");
    let s = seeded.to_str().unwrap();
    let (report, _) = train_json(
        [base_args(d, s), vec!["--epochs", "1", "-z", "1.1", "--seed", "77", "--keep-key"]].concat(),
        &seeded,
    );
    assert_eq!(report["seeded"], true);
    let config = std::fs::read_to_string(seeded.join("config.toml")).unwrap();
    assert!(!config.contains("77") && !config.contains("seed ="), "{config}");
    let keys: Value = serde_json::from_slice(&std::fs::read(seeded.join("run.key")).unwrap()).unwrap();
    assert_eq!(keys["seed"], 77);
    // A key file opened up to others is refused, as ssh refuses such a key.
    std::fs::set_permissions(seeded.join("run.key"), std::fs::Permissions::from_mode(0o644)).unwrap();
    one_line_error(&dptrain(&[base_args(d, s), vec!["--resume"]].concat()), "chmod 600");
}

#[test]
fn one_process_runs_in_a_folder_at_a_time() {
    let (tmp, data) = temp_with_dataset(2000);
    let d = data.to_str().unwrap();
    let out = tmp.path().join("run");
    let o = out.to_str().unwrap();
    let long = [base_args(d, o), vec!["--epochs", "50", "-z", "1.1", "--checkpoint-every", "1"]].concat();
    let mut child = Command::new(binary()).args(&long).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let start = Instant::now();
    while !out.join("checkpoint.bin").exists() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
    }
    // The lock is the folder's own: there is no lock file a user could delete to let a second
    // process in (deleting it used to). A second --resume would draw the same noise again;
    // --overwrite would replace the folder under the running process.
    assert!(!out.join("lock").exists());
    one_line_error(&dptrain(&[base_args(d, o), vec!["--resume"]].concat()), "another dptrain process");
    one_line_error(&dptrain(&[long.clone(), vec!["--overwrite"]].concat()), "another dptrain process");
    child.kill().unwrap();
    child.wait().unwrap();
    // The lock goes with the process, even after kill -9.
    let resumed = dptrain(&[base_args(d, o), vec!["--resume", "--stop-after", "1"]].concat());
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
}

#[test]
fn links_and_special_files_in_the_run_folder_are_never_followed() {
    let (tmp, data) = temp_with_dataset(300);
    let d = data.to_str().unwrap();
    let out = tmp.path().join("run");
    let o = out.to_str().unwrap();
    let run = |extra: &[&str]| dptrain(&[base_args(d, o), vec!["--epochs", "2", "-z", "1.1"], extra.to_vec()].concat());
    assert!(run(&["--stop-after", "2"]).status.success());
    // Links planted at every temporary name: the run goes on, the targets are untouched.
    let target = tmp.path().join("precious");
    std::fs::write(&target, b"precious").unwrap();
    for name in ["checkpoint.bin", "report.json", "config.toml", "run.key", "curves.svg", "checkpoint.tmp"] {
        symlink(&target, dp_data::safe_files::temporary_name(&out.join(name))).unwrap();
    }
    let resumed = run(&["--resume", "--stop-after", "2"]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    // A metrics.jsonl that points at /dev/zero used to be read until memory ran out.
    let metrics = out.join("metrics.jsonl");
    std::fs::remove_file(&metrics).unwrap();
    symlink("/dev/zero", &metrics).unwrap();
    one_line_error(&run(&["--resume"]), "symbolic link");
    std::fs::remove_file(&metrics).unwrap();
    std::fs::create_dir(&metrics).unwrap();
    one_line_error(&run(&["--resume"]), "regular file");
    std::fs::remove_dir(&metrics).unwrap();
    // config.toml as a FIFO (used to hang --resume for ever), a link to /dev/zero or a sparse
    // 4 GB file (used to abort on allocation): one line each, at once.
    let config = out.join("config.toml");
    let kept = std::fs::read(&config).unwrap();
    std::fs::remove_file(&config).unwrap();
    let name = std::ffi::CString::new(config.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    let start = std::time::Instant::now();
    one_line_error(&run(&["--resume"]), "not a regular file");
    assert!(start.elapsed() < Duration::from_secs(20), "no hang");
    std::fs::remove_file(&config).unwrap();
    symlink("/dev/zero", &config).unwrap();
    one_line_error(&run(&["--resume"]), "symbolic link");
    std::fs::remove_file(&config).unwrap();
    std::fs::File::create(&config).unwrap().set_len(4 << 30).unwrap();
    one_line_error(&run(&["--resume"]), "more than the");
    std::fs::write(&config, &kept).unwrap();
    // A sparse 12 GB checkpoint (used to abort allocating 12 GB): refused by the size its model
    // implies, before anything is read.
    let checkpoint = out.join("checkpoint.bin");
    let good = std::fs::read(&checkpoint).unwrap();
    std::fs::File::create(&checkpoint).unwrap().set_len(12 << 30).unwrap();
    one_line_error(
        &with_budget(&[base_args(d, o), vec!["--epochs", "2", "-z", "1.1", "--resume"]].concat()),
        "more than the",
    );
    std::fs::write(&checkpoint, &good).unwrap();
    // The key file as a link to a copy of itself: refused.
    let key = std::fs::read(out.join("run.key")).unwrap();
    let copy = tmp.path().join("key-copy");
    std::fs::write(&copy, &key).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_file(out.join("run.key")).unwrap();
    symlink(&copy, out.join("run.key")).unwrap();
    one_line_error(&run(&["--resume"]), "symbolic link");
    std::fs::remove_file(out.join("run.key")).unwrap();
    std::fs::write(out.join("run.key"), &key).unwrap();
    std::fs::set_permissions(out.join("run.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(run(&["--resume"]).status.success());
}

/// `dptrain args` with a memory budget of 16 GiB, so that what is refused does not depend on
/// the machine's memory.
fn with_budget(args: &[&str]) -> std::process::Output {
    let budget = (16u64 << 30).to_string();
    Command::new(binary()).args(args).env("DPTRAIN_MEMORY_BUDGET", budget).output().unwrap()
}

#[test]
fn absurd_sizes_and_counts_are_one_line_errors() {
    // Counts: a benchmark of 2^64 - 1 lots, and a stop that wraps.
    let bench = |extra: &[&str]| {
        dptrain(&[vec!["bench", "--model", "logreg", "--lot-size", "16", "--device", "cpu"], extra.to_vec()].concat())
    };
    one_line_error(&bench(&["--iterations", "18446744073709551615"]), "timed");
    one_line_error(&bench(&["--warmup", "18446744073709551615"]), "warm-up");
    // A physical batch of 60,001 mnist-cnn examples needs more than the machine has.
    let lot = with_budget(&["bench", "--model", "mnist-cnn", "--lot-size", "60001", "--device", "cpu"]);
    one_line_error(&lot, "memory budget");

    let (tmp, data) = temp_with_dataset(300);
    let d = data.to_str().unwrap();
    let out = tmp.path().join("run");
    let o = out.to_str().unwrap();
    let train =
        |extra: &[&str]| dptrain(&[base_args(d, o), vec!["--epochs", "2", "-z", "1.1"], extra.to_vec()].concat());
    one_line_error(&train(&["--stop-after", "0"]), "stop after");
    assert!(!out.exists(), "a refused run leaves no folder behind");
    assert!(train(&["--stop-after", "3"]).status.success());
    let (report, _) =
        train_json([base_args(d, o), vec!["--resume", "--stop-after", "18446744073709551615"]].concat(), &out);
    assert_eq!(report["steps"], 12, "--stop-after u64::MAX runs to the end instead of wrapping to 0 steps");

    // An empty test set would report test accuracy 0.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    tiny_dataset(&empty, 100);
    images(&empty, "t10k", 0, 28, 28, 0);
    let e = empty.to_str().unwrap();
    one_line_error(&dptrain(&[base_args(e, o), vec!["-z", "1", "--overwrite"]].concat()), "test set");

    // Four 4096x4096 images with mnist-cnn: refused from arithmetic, not an aborted allocation.
    let huge = tmp.path().join("huge");
    std::fs::create_dir(&huge).unwrap();
    images(&huge, "train", 4, 4096, 4096, 9);
    images(&huge, "t10k", 1, 4096, 4096, 9);
    let mut args = base_args(huge.to_str().unwrap(), o);
    (args[8], args[10]) = ("mnist-cnn", "2");
    one_line_error(&with_budget(&[args, vec!["-z", "1", "--overwrite"]].concat()), "memory budget");

    // Five 65535x65535 images announced by a 24-byte header: refused before a byte is read.
    let bomb = tmp.path().join("bomb");
    std::fs::create_dir(&bomb).unwrap();
    tiny_dataset(&bomb, 100);
    std::fs::write(bomb.join("train-images-idx3-ubyte"), dp_data::idx::encode_idx(&[5, 65535, 65535], &[])).unwrap();
    one_line_error(
        &with_budget(&[base_args(bomb.to_str().unwrap(), o), vec!["-z", "1", "--overwrite"]].concat()),
        "memory budget",
    );
}

/// On a pipe (a log file, CI) progress is plain lines: the run's set-up, its first step and its
/// evaluations, instead of silence until the end. The plan's epsilon is labelled a plan: only the
/// evaluations' epsilons, from the ledger, carry a guarantee.
#[test]
fn a_run_on_a_pipe_says_it_is_alive() {
    let (tmp, data) = temp_with_dataset(300);
    let out = tmp.path().join("run");
    let args = [base_args(data.to_str().unwrap(), out.to_str().unwrap()), vec!["--epochs", "2", "-z", "1.1"]].concat();
    let output = dptrain(&args);
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    for line in ["device: cpu", "planned steps spend", "1/12 steps [", "step 12: test accuracy"] {
        assert!(stderr.contains(line), "{line} missing: {stderr}");
    }
    let plan = stderr.lines().find(|line| line.contains("planned steps spend")).unwrap_or_default();
    assert!(plan.ends_with("rdp, planned)"), "{plan}");
    let evaluated = stderr.lines().find(|line| line.contains("step 12: test accuracy")).unwrap_or_default();
    assert!(evaluated.ends_with("rdp, certified)"), "{evaluated}");
}

#[test]
fn a_run_killed_while_writing_its_first_checkpoint_starts_again_afresh() {
    let (tmp, data) = temp_with_dataset(300);
    let d = data.to_str().unwrap();
    let (whole, killed) = (tmp.path().join("whole"), tmp.path().join("killed"));
    let run = |out: &Path, extra: &[&str]| {
        dptrain(&[base_args(d, out.to_str().unwrap()), vec!["--epochs", "1", "-z", "1.1"], extra.to_vec()].concat())
    };
    assert!(run(&whole, &["--stop-after", "1"]).status.success());
    // What kill -9 during the first checkpoint's write leaves: the settings, the keys and the
    // checkpoint's temporary file.
    std::fs::create_dir(&killed).unwrap();
    for file in ["config.toml", "run.key"] {
        std::fs::copy(whole.join(file), killed.join(file)).unwrap();
    }
    std::fs::write(dp_data::safe_files::temporary_name(&killed.join("checkpoint.bin")), b"DPTCK").unwrap();
    one_line_error(&run(&killed, &["--resume"]), "took no step and spent nothing");
    let fresh = run(&killed, &[]);
    assert!(fresh.status.success(), "{}", String::from_utf8_lossy(&fresh.stderr));
    assert!(killed.join("report.json").exists());
}
