//! The released model of a completed run, as a file anyone can load: `model.safetensors` in the
//! run folder, in PyTorch's names and layouts (`dp_engine::weights`), with the run's report in
//! its metadata (epsilon, delta, accountant, guarantee label, mechanism, steps, noise, sampling
//! rate, model, and which parameters: the average or the last iterate). The run's keys are never
//! in it. [`export`] copies it elsewhere with its tensors renamed to a user's own names.

use crate::folder::keys::KEY_FILE;
use crate::folder::{MODEL_FILE, REPORT_FILE};
use crate::report::RunReport;
use burn::module::Module;
use dp_data::safe_files::{PUBLIC, file_error, occupied, read_regular, write_atomic};
use dp_engine::error::{EngineError, Result};
use dp_engine::weights::{MAX_WEIGHTS_FILE, Rename, save_weights};
use regex::Regex;
use safetensors::SafeTensors;
use std::path::{Path, PathBuf};

/// What the metadata says the file is.
const FORMAT: &str = "dptrain model 1";

/// The report's fields as the file's metadata: every field but the folder's paths, numbers and
/// labels as their JSON text, the report's privacy under the same keys as report.json.
fn metadata(report: &RunReport, averaged: bool) -> Result<Vec<(String, String)>> {
    let value = serde_json::to_value(report).map_err(|e| EngineError::invalid("report", e.to_string()))?;
    let fields = value.as_object().into_iter().flatten();
    let mut pairs: Vec<(String, String)> = fields
        .filter(|(key, value)| !matches!(key.as_str(), "run_dir" | "curves") && !value.is_null())
        .map(|(key, value)| (key.clone(), value.as_str().map_or_else(|| value.to_string(), str::to_string)))
        .collect();
    pairs.push(("format".into(), FORMAT.into()));
    pairs.push(("parameters".into(), if averaged { "average" } else { "last iterate" }.into()));
    Ok(pairs)
}

/// Writes `model`, the released model of the completed run in `dir` (`averaged`: the parameter
/// average), with `report` in its metadata.
pub(crate) fn write<M: Module>(dir: &Path, model: &M, report: &RunReport, averaged: bool) -> Result<()> {
    save_weights(model, &dir.join(MODEL_FILE), &metadata(report, averaged)?, &[])
}

/// What [`export`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Exported {
    /// The file written.
    pub path: PathBuf,
    /// Its tensors' names, sorted.
    pub tensors: Vec<String>,
    /// The run's privacy as its metadata says it (`epsilon ... (delta ..., accountant,
    /// guarantee)`).
    pub privacy: String,
    /// True when the run folder still holds its key file, which must never travel with the
    /// model (it is never written into the export).
    pub key_present: bool,
}

/// Writes the model of the completed run in `run_dir` to `out` (a new file), its tensors renamed
/// by `renames` (each a regular expression and its replacement, applied in turn to every
/// name), the run's report kept in the metadata. Refused in one line: a folder with no completed
/// run, a rename that matches no tensor or gives two tensors one name, an existing `out`.
pub fn export(run_dir: &Path, out: &Path, renames: &[Rename<'_>]) -> Result<Exported> {
    let model = run_dir.join(MODEL_FILE);
    if !occupied(&run_dir.join(REPORT_FILE)) || !occupied(&model) {
        return Err(file_error(run_dir, "holds no completed run (report.json and model.safetensors)").into());
    }
    if occupied(out) {
        return Err(file_error(out, "already exists: give a new file").into());
    }
    let bytes = read_regular(&model, MAX_WEIGHTS_FILE)?;
    let bad = |e: &dyn std::fmt::Display| EngineError::from(file_error(&model, e.to_string()));
    let (_, header) = SafeTensors::read_metadata(&bytes).map_err(|e| bad(&e))?;
    let metadata = header.metadata().clone().unwrap_or_default();
    if metadata.get("format").map(String::as_str) != Some(FORMAT) {
        return Err(bad(&format!("is not a model dptrain wrote (no `format = {FORMAT}` in its metadata)")));
    }
    let mut tensors = SafeTensors::deserialize(&bytes).map_err(|e| bad(&e))?.tensors();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let mut names: Vec<String> = tensors.iter().map(|(n, _)| n.clone()).collect();
    for (pattern, replacement) in renames {
        let regex = Regex::new(pattern).map_err(|e| {
            EngineError::invalid("rename", format!("`{pattern}` is not a regular expression: {e}").replace('\n', " "))
        })?;
        if !names.iter().any(|n| regex.is_match(n)) {
            return Err(EngineError::invalid(
                "rename",
                format!("`{pattern}` matches no tensor ({})", names.join(", ")),
            ));
        }
        names = names.iter().map(|n| regex.replace(n, *replacement).into_owned()).collect();
    }
    let mut sorted = names.clone();
    sorted.sort();
    if let Some(pair) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(EngineError::invalid("rename", format!("two tensors would both be named `{}`", pair[0])));
    }
    let views = names.into_iter().zip(tensors.into_iter().map(|(_, v)| v));
    let written = safetensors::serialize(views, Some(metadata.clone())).map_err(|e| bad(&e))?;
    write_atomic(out, &written, PUBLIC)?;
    let field = |k: &str| metadata.get(k).map_or("?", String::as_str).to_string();
    // A run without privacy (the baseline) has no epsilon in its report: infinite.
    let epsilon = metadata.get("epsilon").map_or("infinite", String::as_str);
    let privacy =
        format!("epsilon {epsilon} (delta {}, {}, {})", field("delta"), field("accountant"), field("guarantee"));
    Ok(Exported { path: out.to_path_buf(), tensors: sorted, privacy, key_present: occupied(&run_dir.join(KEY_FILE)) })
}
