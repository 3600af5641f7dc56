//! The seal of a model file's report: an HMAC-SHA256 under the owner's key
//! ([`crate::owner_key`]) of the metadata and the weights together, kept in the metadata under
//! `report_seal`. Anybody who can write a file can write its metadata: a report is believed only
//! where its seal verifies, and then only for the weights it was sealed with.

use crate::owner_key::OwnerKey;
use crate::seal::{seal, verifies};
use dp_data::safe_files::file_error;
use dp_engine::error::{EngineError, Result};
use safetensors::SafeTensors;
use safetensors::tensor::TensorView;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The metadata key of the report's seal (hex HMAC-SHA256 under the owner's key).
pub(crate) const SEAL_KEY: &str = "report_seal";
/// SHA-256 of what a seal covers: the metadata but the seal (in key order) and every tensor in
/// name order (name, dtype, shape, bytes), each part length-prefixed.
fn sealed_digest(metadata: &HashMap<String, String>, tensors: &Tensors<'_>) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut part = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    let sorted: BTreeMap<&String, &String> = metadata.iter().filter(|(k, _)| *k != SEAL_KEY).collect();
    for (k, v) in sorted {
        part(k.as_bytes());
        part(v.as_bytes());
    }
    let mut order: Vec<&(String, TensorView<'_>)> = tensors.iter().collect();
    order.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, view) in order {
        part(name.as_bytes());
        part(format!("{:?}", view.dtype()).as_bytes());
        part(&view.shape().iter().flat_map(|d| (*d as u64).to_le_bytes()).collect::<Vec<u8>>());
        part(view.data());
    }
    h.finalize().into()
}

/// `metadata` with the seal of it and `tensors` under `key`.
pub(crate) fn with_seal(
    mut metadata: HashMap<String, String>,
    tensors: &Tensors<'_>,
    key: &OwnerKey,
) -> HashMap<String, String> {
    let tag = seal(key.secret(), &[&sealed_digest(&metadata, tensors)]);
    metadata.insert(SEAL_KEY.into(), hex::encode(tag));
    metadata
}

/// Whether `metadata`'s report is sealed with `tensors` under the owner's `key`.
pub(crate) fn verified(metadata: &HashMap<String, String>, tensors: &Tensors<'_>, key: Option<&OwnerKey>) -> bool {
    let tag = metadata.get(SEAL_KEY).and_then(|t| hex::decode(t).ok());
    match (key, tag) {
        (Some(key), Some(tag)) => verifies(key.secret(), &[&sealed_digest(metadata, tensors)], &tag),
        _ => false,
    }
}

/// A model file's tensors, by name.
pub(crate) type Tensors<'b> = Vec<(String, TensorView<'b>)>;

/// A model file's tensors and metadata, read from `bytes` (of `path`).
pub(crate) fn contents<'b>(bytes: &'b [u8], path: &Path) -> Result<(Tensors<'b>, HashMap<String, String>)> {
    let bad = |e: &dyn std::fmt::Display| EngineError::from(file_error(path, e.to_string()));
    let (_, header) = SafeTensors::read_metadata(bytes).map_err(|e| bad(&e))?;
    let metadata = header.metadata().clone().unwrap_or_default();
    let tensors = SafeTensors::deserialize(bytes).map_err(|e| bad(&e))?.tensors();
    Ok((tensors, metadata))
}

/// `tensors` with `metadata` as a safetensors file.
pub(crate) fn serialized(tensors: Tensors<'_>, metadata: HashMap<String, String>, path: &Path) -> Result<Vec<u8>> {
    safetensors::serialize(tensors, Some(metadata)).map_err(|e| file_error(path, e.to_string()).into())
}
