//! The released model of a completed run, as a file anyone can load: `model.safetensors` in the
//! run folder, in PyTorch's names and layouts (`dp_engine::weights`), with the run's report in
//! its metadata (epsilon, delta, accountant, guarantee label, mechanism, steps, noise, sampling
//! rate, model, and which parameters: the average or the last iterate). The run's keys are never
//! in it.

use crate::folder::MODEL_FILE;
use crate::report::RunReport;
use burn::module::Module;
use dp_engine::error::{EngineError, Result};
use dp_engine::weights::save_weights;
use std::path::Path;

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
