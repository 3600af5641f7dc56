//! The released model of a completed run, as a file anyone can load: `model.safetensors` in the
//! run folder, in PyTorch's names and layouts (`dp_engine::weights`), with the run's report in
//! its metadata (epsilon, delta, accountant, guarantee label, mechanism, steps, noise, sampling
//! rate, model, and which parameters: the average or the last iterate), sealed with the weights
//! it describes under the owner's key ([`crate::owner_key::seal`]): anybody can write a file's
//! metadata, so a report is believed (its `certified` shown) only where its seal verifies. The
//! run's keys are never in it. [`export`] copies it elsewhere with its tensors renamed to a user's
//! own names; [`crate::provenance`] says what a file given to `--init-from` is.

use crate::folder::keys::KEY_FILE;
use crate::folder::{MODEL_FILE, REPORT_FILE};
use crate::owner_key::OwnerKey;
use crate::owner_key::seal::{SEAL_KEY, Tensors, contents, serialized, verified, with_seal};
use crate::report::RunReport;
use burn::module::Module;
use dp_data::safe_files::{PUBLIC, file_error, occupied, read_regular, write_atomic};
use dp_engine::error::{EngineError, Result};
use dp_engine::weights::{MAX_WEIGHTS_FILE, Rename, weights_bytes};
use regex::Regex;
use std::path::{Path, PathBuf};

/// What the metadata says the file is.
const FORMAT: &str = "dptrain model 1";
/// The safetensors format's own key in a header: no tensor may take it.
const FORMAT_KEY: &str = "__metadata__";

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
/// average), with `report` in its metadata, sealed with the weights under the owner's `key`
/// (checked before the run's first step: [`OwnerKey::for_folder`]).
pub(crate) fn write<M: Module>(
    dir: &Path,
    model: &M,
    report: &RunReport,
    averaged: bool,
    key: &OwnerKey,
) -> Result<()> {
    let path = dir.join(MODEL_FILE);
    let bytes = weights_bytes(model, &metadata(report, averaged)?, &[]).map_err(|e| file_error(&path, e))?;
    let (tensors, metadata) = contents(&bytes, &path)?;
    let metadata = with_seal(metadata, &tensors, key);
    let sealed = serialized(tensors, metadata, &path)?;
    Ok(write_atomic(&path, &sealed, PUBLIC)?)
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
    /// True when the report's seal verified under the owner's key (its label is then shown).
    pub verified: bool,
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
    let (mut tensors, metadata) = contents(&bytes, &model)?;
    if metadata.get("format").map(String::as_str) != Some(FORMAT) {
        return Err(bad(&format!("is not a model dptrain wrote (no `format = {FORMAT}` in its metadata)")));
    }
    let key = OwnerKey::load()?;
    let sealed = verified(&metadata, &tensors, key.as_ref());
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
    if names.iter().any(|n| n == FORMAT_KEY || n.is_empty()) {
        return Err(EngineError::invalid(
            "rename",
            format!(
                "a tensor would be named `{FORMAT_KEY}` or nothing: the format keeps `{FORMAT_KEY}` for the metadata"
            ),
        ));
    }
    let mut sorted = names.clone();
    sorted.sort();
    if let Some(pair) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(EngineError::invalid("rename", format!("two tensors would both be named `{}`", pair[0])));
    }
    let renamed: Tensors<'_> = names.into_iter().zip(tensors.into_iter().map(|(_, v)| v)).collect();
    // The same release under other names: sealed again where its report verified, else
    // written without a seal (its report then proves nothing anywhere).
    let written_metadata = match (&key, sealed) {
        (Some(key), true) => with_seal(metadata.clone(), &renamed, key),
        _ => metadata.iter().filter(|(k, _)| *k != SEAL_KEY).map(|(k, v)| (k.clone(), v.clone())).collect(),
    };
    write_atomic(out, &serialized(renamed, written_metadata, &model)?, PUBLIC)?;
    let field = |k: &str| metadata.get(k).map_or("?", String::as_str).to_string();
    // A run without privacy (the baseline) has no epsilon in its report: infinite.
    let epsilon = metadata.get("epsilon").map_or("infinite", String::as_str);
    let label = match sealed {
        true => field("guarantee"),
        false => "none: its report is not sealed under this user's owner key, so nothing shows this file's weights are the run's it describes".into(),
    };
    let privacy = format!("epsilon {epsilon} (delta {}, {}, {label})", field("delta"), field("accountant"));
    Ok(Exported {
        path: out.to_path_buf(),
        tensors: sorted,
        privacy,
        verified: sealed,
        key_present: occupied(&run_dir.join(KEY_FILE)),
    })
}
