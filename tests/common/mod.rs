//! Helpers shared by the end-to-end tests: running the binary, tiny MNIST-format datasets, the
//! one-line error contract, and reading or forging a run folder's checkpoint.
#![allow(dead_code)]

pub mod checkpoint_view;

use dp_data::idx::encode_idx;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The checkout under test: cargo names it when it runs the tests (the path compiled in is the
/// checkout that built them, which a target folder shared by several checkouts may outlive).
pub fn workspace() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The `dptrain` under test: the one cargo built with these tests (with CUDA in CI).
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_dptrain")
}

/// Runs `dptrain` with `args`.
pub fn dptrain(args: &[&str]) -> Output {
    Command::new(binary()).args(args).output().expect("dptrain runs")
}

/// `dptrain` with `args` and the environment changed by `env` (a value of None removes it).
pub fn dptrain_with(args: &[&str], env: &[(&str, Option<&std::ffi::OsStr>)]) -> Output {
    let mut command = Command::new(binary());
    command.args(args);
    for (key, value) in env {
        match value {
            Some(v) => command.env(key, v),
            None => command.env_remove(key),
        };
    }
    command.output().expect("dptrain runs")
}

/// True when the `dptrain` under test was built with CUDA (`dptrain --version` lists its devices).
pub fn built_with_cuda() -> bool {
    String::from_utf8_lossy(&dptrain(&["--version"]).stdout).contains("cuda")
}

/// A dataset of `n` 28x28 images whose class shows in their brightness (learnable), plus 50 test images.
pub fn tiny_dataset(dir: &Path, n: usize) {
    let write = |prefix: &str, count: usize| {
        let labels: Vec<u8> = (0..count).map(|i| (i % 10) as u8).collect();
        let pixels: Vec<u8> =
            labels.iter().flat_map(|&l| (0..784).map(move |p| ((p * 7 + usize::from(l) * 25) % 256) as u8)).collect();
        std::fs::write(dir.join(format!("{prefix}-images-idx3-ubyte")), encode_idx(&[count, 28, 28], &pixels)).unwrap();
        std::fs::write(dir.join(format!("{prefix}-labels-idx1-ubyte")), encode_idx(&[count], &labels)).unwrap();
    };
    write("train", n);
    write("t10k", 50);
}

/// MNIST-format files of `count` images of `rows` x `cols` (every pixel `value`) under `prefix`.
pub fn images(dir: &Path, prefix: &str, count: usize, rows: usize, cols: usize, value: u8) {
    let labels: Vec<u8> = (0..count).map(|i| (i % 10) as u8).collect();
    let pixels = vec![value; count * rows * cols];
    std::fs::write(dir.join(format!("{prefix}-images-idx3-ubyte")), encode_idx(&[count, rows, cols], &pixels)).unwrap();
    std::fs::write(dir.join(format!("{prefix}-labels-idx1-ubyte")), encode_idx(&[count], &labels)).unwrap();
}

/// A temporary folder holding `data/`, a tiny dataset of `n` training images.
pub fn temp_with_dataset(n: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    tiny_dataset(&data, n);
    (tmp, data)
}

/// Asserts that `out` failed with one line on stderr containing `needle`.
pub fn one_line_error(out: &Output, needle: &str) {
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "stderr: {stderr}");
    assert!(stderr.contains(needle), "stderr: {stderr}");
}

/// A logistic-regression run on the CPU with lots of 50 from `data` into `out`.
pub fn base_args<'a>(data: &'a str, out: &'a str) -> Vec<&'a str> {
    vec!["train", "--device", "cpu", "--data-dir", data, "--out-dir", out, "--model", "logreg", "--lot-size", "50"]
}

/// The run's checkpoint.bin as JSON: its header, with the library's state under `state`
/// ([`checkpoint_view::view`]).
pub fn checkpoint(out: &Path) -> Value {
    let bytes = std::fs::read(out.join("checkpoint.bin")).unwrap();
    assert_eq!(&bytes[..8], b"DPTCKPT7");
    checkpoint_view::view(&bytes)
}

/// Runs `dptrain` with `args` and `--json`, which must succeed: its report and the checkpoint in
/// `out`.
pub fn train_json(mut args: Vec<&str>, out: &Path) -> (Value, Value) {
    args.push("--json");
    let output = dptrain(&args);
    assert!(output.status.success(), "{}: {}", out.display(), String::from_utf8_lossy(&output.stderr));
    (serde_json::from_slice(&output.stdout).unwrap(), checkpoint(out))
}

/// The MAC key of the run in `out`, read from its key file as only its owner can.
pub fn mac_key(out: &Path) -> Vec<u8> {
    let keys: Value = serde_json::from_slice(&std::fs::read(out.join("run.key")).unwrap()).unwrap();
    hex::decode(keys["mac_key"].as_str().unwrap()).unwrap()
}

/// Rewrites the checkpoint in `out` with `edit` applied to its JSON view ([`checkpoint`]),
/// sealed with `key` (the run's MAC key: a forger holding the key file, so that only the checks
/// against the run can catch the edit; any other key: a forger without it).
pub fn forge(out: &Path, key: &[u8], edit: &dyn Fn(&mut Value)) {
    use hmac::Mac;
    let path = out.join("checkpoint.bin");
    let bytes = std::fs::read(&path).unwrap();
    let mut view = checkpoint_view::view(&bytes);
    edit(&mut view);
    let mut body = checkpoint_view::body(&bytes, &view);
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    mac.update(&body);
    body.extend(mac.finalize().into_bytes());
    std::fs::write(&path, body).unwrap();
}

/// [`forge`] with the run's own key.
pub fn tamper(out: &Path, edit: &dyn Fn(&mut Value)) {
    forge(out, &mac_key(out), edit);
}
