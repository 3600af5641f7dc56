//! A training run's folder, the boundary between what the run computed and what anyone with
//! access to the disk can do:
//!
//! - `config.toml`: the run's settings as its program gives them (the seed left out), bound to
//!   each checkpoint by digest;
//! - `checkpoint.bin`: model, optimiser, ledger and the key-free positions of the sampler and
//!   noise streams, sealed by a MAC (`crate::folder::checkpoint`);
//! - `run.key`: the secrets (stream keys, MAC key, seed), owner-only, removed when the run
//!   completes ([`keys`]);
//! - `metrics.jsonl` and `report.json`: what the run printed;
//! - `model.safetensors`: the released model of a completed run, its report in the metadata;
//! - the folder itself is locked by the one process running in it ([`lock`]).
//!
//! Every file is read without following links and refused unless regular and of a bounded
//! size, and written atomically through an exclusively created temporary file
//! ([`dp_data::safe_files`]).

pub mod checkpoint;
pub mod keys;
pub mod lock;
mod run_folder;

pub use run_folder::RunFolder;

use crate::seal::sha256_hex;
use dp_data::safe_files::{PUBLIC, append_line, file_error, occupied, read_regular, remove_if_present, write_atomic};
use dp_engine::error::{EngineError, Result};
use keys::{KEY_FILE, RunKeys};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

/// The run's settings.
pub const CONFIG_FILE: &str = "config.toml";
/// Training metrics, one JSON object per line.
pub const METRICS_FILE: &str = "metrics.jsonl";
/// The final report.
pub const REPORT_FILE: &str = "report.json";
/// The run's curves ([`crate::curves`]), redrawn at each evaluation, with a PNG beside it.
pub const PLOT_FILE: &str = "curves.svg";
/// The PNG of the run's curves.
pub const PLOT_PNG: &str = "curves.png";
/// The released model of a completed run, with its report ([`crate::model_file`]).
pub const MODEL_FILE: &str = "model.safetensors";

/// The files a run writes besides its lock: a folder holding any of them holds a run.
const RUN_FILES: [&str; 8] =
    ["checkpoint.bin", CONFIG_FILE, METRICS_FILE, REPORT_FILE, KEY_FILE, PLOT_FILE, PLOT_PNG, MODEL_FILE];

/// The largest config.toml read.
pub const MAX_CONFIG: u64 = 1 << 20;
/// The largest metrics.jsonl read (a long run logs a few megabytes).
const MAX_METRICS: u64 = 256 << 20;
/// The largest report.json read.
const MAX_REPORT: u64 = 1 << 20;

/// The files of a run that `run_dir` holds (any of them: the folder holds a run).
pub fn run_files(run_dir: &Path) -> Vec<&'static str> {
    RUN_FILES.into_iter().filter(|f| occupied(&run_dir.join(f))).collect()
}

/// Prepares the folder of a fresh run (its lock held): refused when it holds another run's
/// files, unless `overwrite` or that run never took a step (then they are removed first); writes config.toml (the `settings`
/// TOML, which holds no seed, with the noise multiplier `z` they resolve to in a comment) and
/// the key file of `keys`, and returns config.toml's digest.
pub fn start(run_dir: &Path, settings: &str, z: Option<f64>, overwrite: bool, keys: &RunKeys) -> Result<String> {
    let present = run_files(run_dir);
    // A run is checkpointed before its first step: one killed before that checkpoint was all
    // written left its settings and keys only, took no step and released nothing. It is
    // replaced, as if it had never started.
    let never_stepped = present.iter().all(|f| [CONFIG_FILE, KEY_FILE].contains(f));
    if !present.is_empty() {
        if !overwrite && completed(run_dir) {
            return Err(EngineError::invalid(
                "out dir",
                format!(
                    "{} holds a completed run (its model is {MODEL_FILE}): nothing is left to resume; give RunOptions::overwrite to replace it, or another run folder",
                    run_dir.display()
                ),
            ));
        }
        if !overwrite && !never_stepped {
            return Err(EngineError::invalid(
                "out dir",
                format!(
                    "{} holds another run ({}): give RunFolder::resume to continue it, RunOptions::overwrite to replace it, or another run folder",
                    run_dir.display(),
                    present.join(", ")
                ),
            ));
        }
        for f in present {
            remove_if_present(&run_dir.join(f))?;
        }
    }
    let path = run_dir.join(CONFIG_FILE);
    let z = z.map_or("none (no noise)".to_string(), |z| z.to_string());
    let seeded = if keys.seed.is_some() { " It is seeded; the seed is kept in run.key." } else { "" };
    let toml = format!("# The settings of this run; its noise multiplier resolves to {z}.{seeded}\n{settings}");
    write_atomic(&path, toml.as_bytes(), PUBLIC)?;
    keys.save(run_dir)?;
    Ok(sha256_hex(toml.as_bytes()))
}

/// The config.toml of the run in `run_dir` (which holds no seed) and its digest.
pub fn read_config(run_dir: &Path) -> Result<(String, String)> {
    let path = run_dir.join(CONFIG_FILE);
    let bytes = read_regular(&path, MAX_CONFIG)?;
    let digest = sha256_hex(&bytes);
    let text = String::from_utf8(bytes).map_err(|_| file_error(&path, "not a run configuration"))?;
    Ok((text, digest))
}

/// `text`, the config.toml of the run in `run_dir`, as the settings its program wrote.
pub fn parse_config<C: DeserializeOwned>(run_dir: &Path, text: &str) -> Result<C> {
    toml::from_str(text).map_err(|_| file_error(&run_dir.join(CONFIG_FILE), "not a run configuration").into())
}

/// True when `run_dir` holds a completed run: its report says so and its key file is gone.
fn completed(run_dir: &Path) -> bool {
    let report = read_regular(&run_dir.join(REPORT_FILE), MAX_REPORT).ok();
    report
        .and_then(|r| serde_json::from_slice::<serde_json::Value>(&r).ok())
        .is_some_and(|r| r["completed"] == true && !occupied(&keys::key_path(run_dir)))
}

/// The keys of the run in `run_dir`; when they are gone because the run completed, says so.
pub fn read_keys(run_dir: &Path) -> Result<RunKeys> {
    Ok(RunKeys::load(run_dir).map_err(|e| {
        if completed(run_dir) {
            file_error(
                run_dir,
                "the run is complete (its key file was removed at the end): nothing is left to resume; start a new run with RunOptions::overwrite or another run folder",
            )
        } else {
            e
        }
    })?)
}

/// Drops the lines of `path` logged after `step`: a run killed after logging steps its last
/// checkpoint does not hold takes them again on resume, and would log them twice.
pub fn keep_metrics_until(path: &Path, step: u64) -> Result<()> {
    if !occupied(path) {
        return Ok(());
    }
    let bytes = read_regular(path, MAX_METRICS)?;
    let kept: String = String::from_utf8_lossy(&bytes)
        .lines()
        .filter(|line| {
            let logged = serde_json::from_str::<serde_json::Value>(line).ok().and_then(|v| v["step"].as_u64());
            logged.is_some_and(|s| s <= step)
        })
        .map(|line| format!("{line}\n"))
        .collect();
    Ok(write_atomic(path, kept.as_bytes(), PUBLIC)?)
}

/// Appends `value` as one JSON line to `path`.
pub fn log(path: &Path, value: &impl Serialize) -> Result<()> {
    Ok(append_line(path, &serde_json::to_string(value).map_err(|e| file_error(path, e))?)?)
}

/// Writes the run's report.json.
pub fn write_report(run_dir: &Path, report: &impl Serialize) -> Result<()> {
    let path = run_dir.join(REPORT_FILE);
    let json = serde_json::to_vec_pretty(report).map_err(|e| file_error(&path, e))?;
    Ok(write_atomic(&path, &json, PUBLIC)?)
}
