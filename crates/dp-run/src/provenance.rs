//! Where a run's initial weights came from: the file's digest and, where its report's seal
//! verifies under this user's owner key ([`crate::owner_key::seal`]), that report. A model trained
//! before on the same private data spends it again: the new run's report shows it.

use crate::owner_key::OwnerKey;
use crate::owner_key::seal::{SEAL_KEY, contents, verified};
use crate::seal::sha256_hex;
use dp_data::safe_files::read_regular;
use dp_engine::error::Result;
use dp_engine::weights::MAX_WEIGHTS_FILE;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a model file given as a run's initial weights is: its digest and, where its report's
/// seal verifies under this user's owner key, that report (a model trained before on the same
/// private data spends it again: the new run's report shows which).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// The file.
    pub file: PathBuf,
    /// SHA-256 (hex) of its bytes.
    pub sha256: String,
    /// Its report, when sealed under this user's key (None: none, or none that verifies).
    pub report: Option<BTreeMap<String, String>>,
}

impl Provenance {
    /// The report's caveat about a run started from this file.
    pub fn note(&self) -> String {
        let what = match &self.report {
            Some(r) => format!(
                "a model whose sealed report says epsilon {} ({})",
                r.get("epsilon").map_or("infinite", String::as_str),
                r.get("guarantee").map_or("?", String::as_str)
            ),
            None => "weights with no report that verifies under this user's owner key".into(),
        };
        format!(
            "initial weights from {} (sha256 {}): {what}; a model trained on the same private data spends it again, which this run's epsilon does not count",
            self.file.display(),
            self.sha256
        )
    }
}

/// The provenance of the weights file `path` (any safetensors file: a PyTorch one carries no
/// report).
pub fn provenance(path: &Path) -> Result<Provenance> {
    let bytes = read_regular(path, MAX_WEIGHTS_FILE)?;
    let (tensors, metadata) = contents(&bytes, path)?;
    let report = verified(&metadata, &tensors, OwnerKey::load()?.as_ref())
        .then(|| metadata.into_iter().filter(|(k, _)| k != SEAL_KEY).collect());
    Ok(Provenance { file: path.to_path_buf(), sha256: sha256_hex(&bytes), report })
}
