//! Helpers shared by the end-to-end tests: running the binary, tiny MNIST-format datasets, the
//! one-line error contract, and reading or forging a run folder's checkpoint.
#![allow(dead_code)]

use dp_data::idx::encode_idx;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// Runs `dptrain` with `args`.
pub fn dptrain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dptrain")).args(args).output().expect("dptrain runs")
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

/// The JSON header of the run's checkpoint.bin (magic, header length, header, records, MAC).
pub fn checkpoint(out: &Path) -> Value {
    let bytes = std::fs::read(out.join("checkpoint.bin")).unwrap();
    assert_eq!(&bytes[..8], b"DPTCKPT4");
    let len = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
    serde_json::from_slice(&bytes[16..16 + len]).unwrap()
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

/// Rewrites the checkpoint in `out` with `edit` applied to its header and `cut` bytes removed
/// from the end of its records, sealed with `key` (the run's MAC key: a forger holding the key
/// file, so that only the checks against the run can catch the edit; any other key: a forger
/// without it).
pub fn forge(out: &Path, key: &[u8], edit: &dyn Fn(&mut Value), cut: usize) {
    use hmac::Mac;
    let path = out.join("checkpoint.bin");
    let bytes = std::fs::read(&path).unwrap();
    let len = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
    let mut header: Value = serde_json::from_slice(&bytes[16..16 + len]).unwrap();
    edit(&mut header);
    let header = serde_json::to_vec(&header).unwrap();
    let mut body = b"DPTCKPT4".to_vec();
    body.extend((header.len() as u64).to_le_bytes());
    body.extend(&header);
    body.extend(&bytes[16 + len..bytes.len() - 32 - cut]);
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    mac.update(&body);
    body.extend(mac.finalize().into_bytes());
    std::fs::write(&path, body).unwrap();
}

/// [`forge`] of the header alone.
pub fn tamper_with_key(out: &Path, key: &[u8], edit: &dyn Fn(&mut Value)) {
    forge(out, key, edit, 0);
}

/// [`tamper_with_key`] with the run's own key.
pub fn tamper(out: &Path, edit: &dyn Fn(&mut Value)) {
    tamper_with_key(out, &mac_key(out), edit);
}
