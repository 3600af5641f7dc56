//! The run folder's checkpoints: the library's [`DpCheckpoint`] (model and optimiser as Burn
//! records, the noise allocation's state, the ledger and the key-free positions of the sampler
//! and noise streams) with what the run folder adds (the digest of the configuration it belongs
//! to, its clock, digests of the model), sealed by an HMAC-SHA256 keyed by the run's key file,
//! so that nobody without the key can edit a checkpoint into one that verifies. Written
//! atomically (`safe_files::write_atomic`), so a run killed at any moment resumes from a
//! complete state. Loading checks the MAC; what the privacy claim depends on is then checked
//! against the run by the library (`dp_engine::checkpoint::restore`).
//!
//! Layout: `DPTCKPT7` | header length (u64 LE) | header JSON | the library's checkpoint (one
//! burnpack, `DpCheckpoint::to_bytes`) | MAC.

use crate::provenance::Provenance;
use crate::seal::{SEAL_BYTES, seal, sha256_hex, verifies};
use dp_data::SecretKey;
use dp_data::safe_files::{PUBLIC, read_regular, write_atomic};
use dp_engine::checkpoint::DpCheckpoint;
use dp_engine::error::{EngineError, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The first bytes of every checkpoint.
const MAGIC: &[u8; 8] = b"DPTCKPT7";
/// The first bytes of older versions, and why this one cannot resume them.
const OLD_VERSIONS: [(&[u8; 8], &str); 4] = [
    (b"DPTCKPT2", "written by an older dptrain, which kept the run's keys in it: it cannot be resumed"),
    (b"DPTCKPT4", "written by an older dptrain, whose ledger held no events: finish the run with that version"),
    (
        b"DPTCKPT5",
        "written by an older dptrain, which did not record its keys' fingerprint: finish the run with that version",
    ),
    (
        b"DPTCKPT6",
        "written by an older dptrain, which did not record where the run's initial weights came from: finish the run with that version",
    ),
];
/// The largest header accepted (a header is a few hundred bytes; this bounds what a damaged
/// length field can make the reader allocate).
const MAX_HEADER: u64 = 1 << 20;

/// Bytes a checkpoint may hold besides its tensors (header, ledger, records' metadata).
const SLACK: u64 = 256 << 20;
/// Copies of the parameters a checkpoint may hold (model, optimiser moments, noise allocation
/// state, parameter average), with room to spare.
const PARAM_COPIES: u64 = 16;

/// The largest checkpoint a model of `params` parameters writes: larger files are refused
/// before anything is read (a sparse 12 GB file used to abort on allocation).
pub fn size_bound(params: usize) -> u64 {
    (params as u64).saturating_mul(4 * PARAM_COPIES).saturating_add(SLACK)
}

/// Everything in a checkpoint but the tensors.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// SHA-256 of the run folder's config.toml (the run's configuration), which this checkpoint
    /// belongs to.
    pub config_digest: String,
    /// True for a `--seed` run (the seed itself is in the key file).
    pub seeded: bool,
    /// Unix time (seconds) at which the run started.
    pub started: u64,
    /// Training seconds so far.
    pub seconds: f64,
    /// SHA-256 of the model record.
    pub model_digest: String,
    /// SHA-256 of the parameters' values alone (f32 LE, in the module's order): equal for two
    /// runs that reached the same model, whatever their parameters' ids.
    pub values_digest: String,
    /// Where the run's initial weights came from, as it started (a resume reports this, never
    /// the file as it is then).
    pub initial_weights: Option<Provenance>,
}

/// A checkpoint in memory: the run folder's header and the library's state.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The run folder's fields.
    pub header: Header,
    /// The records and tensors.
    pub state: DpCheckpoint,
}

/// The checkpoint file of a run folder.
pub fn checkpoint_path(run_dir: &Path) -> PathBuf {
    run_dir.join("checkpoint.bin")
}

fn err(path: &Path, reason: impl ToString) -> EngineError {
    EngineError::checkpoint(path, reason.to_string())
}

impl Checkpoint {
    /// The file's bytes, sealed with `key`.
    fn to_bytes(&self, key: &SecretKey) -> Result<Vec<u8>> {
        let header = serde_json::to_vec(&self.header).map_err(|e| EngineError::invalid("checkpoint", e.to_string()))?;
        let state = self.state.to_bytes()?;
        let mut out = Vec::with_capacity(header.len() + state.len() + 64);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(header.len() as u64).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&state);
        let tag = seal(key, &[&out]);
        out.extend_from_slice(&tag);
        Ok(out)
    }

    /// Saves atomically, sealed with the run's MAC key.
    pub fn save(&self, path: &Path, key: &SecretKey) -> Result<()> {
        Ok(write_atomic(path, &self.to_bytes(key)?, PUBLIC)?)
    }

    /// Loads a checkpoint of at most `bound` bytes (and the memory budget), refusing one whose
    /// MAC (under the run's `key`), magic or lengths do not hold; nothing is parsed before the
    /// MAC verifies.
    pub fn load(path: &Path, key: &SecretKey, bound: u64) -> Result<Self> {
        let bytes = read_regular(path, bound.min(dp_data::memory::budget()))?;
        if let Some((_, why)) = OLD_VERSIONS.iter().find(|(magic, _)| bytes.starts_with(*magic)) {
            return Err(err(path, why));
        }
        if bytes.len() < MAGIC.len() + 8 + SEAL_BYTES || &bytes[..MAGIC.len()] != MAGIC {
            return Err(err(path, "not a dptrain checkpoint of this version"));
        }
        let (body, tag) = bytes.split_at(bytes.len() - SEAL_BYTES);
        if !verifies(key, &[body], tag) {
            return Err(err(
                path,
                "its MAC does not verify under the run's key: the file is damaged, was edited, or belongs to another run",
            ));
        }
        let (len, rest) = body[MAGIC.len()..].split_at(8);
        let len = u64::from_le_bytes(len.try_into().unwrap_or_default());
        let header_end = usize::try_from(len).ok().filter(|&n| len <= MAX_HEADER && n <= rest.len());
        let Some(header_end) = header_end else {
            return Err(err(path, format!("a header of {len} bytes")));
        };
        let (header, rest) = rest.split_at(header_end);
        let header: Header = serde_json::from_slice(header).map_err(|e| err(path, format!("corrupt header: {e}")))?;
        let state = DpCheckpoint::from_bytes(rest).map_err(|e| e.of_checkpoint(path))?;
        if sha256_hex(&state.model) != header.model_digest {
            return Err(err(path, "the model record does not match its digest"));
        }
        Ok(Self { header, state })
    }
}
