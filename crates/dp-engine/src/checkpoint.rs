//! Checkpoints: one binary file holding the model and optimiser as Burn records (burnpack), the
//! noise allocation's state as raw f32, and a JSON header with the run's privacy ledger and the
//! key-free positions of its sampler and noise streams; an HMAC-SHA256 keyed by the run's key
//! file ends the file, so that nobody without the key can edit a checkpoint into one that
//! verifies. Written atomically (`run_folder::files::write_atomic`), so a run killed at any
//! moment resumes from a complete state. Loading checks the MAC; what the privacy claim depends
//! on is then checked against the run by the trainer (`resume`).
//!
//! Layout: `DPTCKPT3` | header length (u64 LE) | header JSON | model | optimiser | allocation |
//! MAC.

use crate::error::{EngineError, Result};
use crate::run_folder::files::{PUBLIC, read_regular, write_atomic};
use crate::run_folder::sha256_hex;
use crate::tensor_io::to_host;
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;
use dp_accounting::PrivacyLedger;
use dp_data::{ChaChaPosition, SamplerPosition, SecretKey};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The first bytes of every checkpoint.
const MAGIC: &[u8; 8] = b"DPTCKPT3";
/// The first bytes of the previous version, which kept the streams' keys in the file.
const OLD_MAGIC: &[u8; 8] = b"DPTCKPT2";
/// Bytes of the MAC at the end.
const MAC_BYTES: usize = 32;
/// The largest header accepted (a header is a few kilobytes; this bounds what a damaged length
/// field can make the loader allocate).
const MAX_HEADER: u64 = 64 << 20;

/// The checkpoints' MAC.
type Seal = Hmac<Sha256>;

/// HMAC-SHA256 of `body` under `key`.
fn seal(key: &SecretKey) -> Seal {
    // HMAC takes keys of any length: this cannot fail.
    <Seal as Mac>::new_from_slice(key.as_bytes()).unwrap_or_else(|_| unreachable!("HMAC accepts any key length"))
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
    /// Steps the run plans in total.
    pub planned_steps: u64,
    /// Steps taken so far.
    pub step: u64,
    /// Every privatised step taken so far.
    pub ledger: PrivacyLedger,
    /// Where the lot sampler is (its key is in the key file; its state follows from the steps).
    pub sampler: SamplerPosition,
    /// Where the noise stream is (None for the unperturbed baseline).
    pub noise: Option<ChaChaPosition>,
    /// Training seconds so far.
    pub seconds: f64,
    /// Bytes of the model record.
    pub model_bytes: u64,
    /// Bytes of the optimiser record.
    pub optimizer_bytes: u64,
    /// Scalars of each tensor of the noise allocation's state (optimized: the average released
    /// gradient; optimized-paper: the current sigma), one per parameter.
    pub allocation: Option<Vec<usize>>,
    /// SHA-256 of the model record.
    pub model_digest: String,
    /// SHA-256 of the parameters' values alone (f32 LE, in the module's order): equal for two
    /// runs that reached the same model, whatever their parameters' ids.
    pub values_digest: String,
}

/// A checkpoint in memory.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// Its header.
    pub header: Header,
    /// The model's burnpack record.
    pub model: Vec<u8>,
    /// The optimiser's burnpack record.
    pub optimizer: Vec<u8>,
    /// The noise allocation's state, per parameter.
    pub allocation: Option<Vec<Vec<f32>>>,
}

/// The checkpoint file of a run folder.
pub fn checkpoint_path(run_dir: &Path) -> PathBuf {
    run_dir.join("checkpoint.bin")
}

/// Hex SHA-256 of the values of every parameter of `model`, in its visiting order.
pub fn values_digest<M: Module>(model: &M) -> String {
    struct Hash(Sha256);
    impl ModuleVisitor for Hash {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            for x in to_host(&param.val()) {
                self.0.update(x.to_le_bytes());
            }
        }
    }
    let mut hash = Hash(Sha256::new());
    model.visit(&mut hash);
    hex::encode(hash.0.finalize())
}

fn err(path: &Path, reason: impl ToString) -> EngineError {
    EngineError::Checkpoint { path: path.to_path_buf(), reason: reason.to_string() }
}

/// Takes `n` bytes from the front of `rest`.
fn take<'a>(rest: &mut &'a [u8], n: u64, what: &str, path: &Path) -> Result<&'a [u8]> {
    let n =
        usize::try_from(n).ok().filter(|&n| n <= rest.len()).ok_or_else(|| err(path, format!("truncated {what}")))?;
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Ok(head)
}

impl Checkpoint {
    /// The file's bytes, sealed with `key`.
    fn to_bytes(&self, key: &SecretKey) -> Result<Vec<u8>> {
        let header = serde_json::to_vec(&self.header).map_err(|e| EngineError::invalid("checkpoint", e.to_string()))?;
        let mut out = Vec::with_capacity(header.len() + self.model.len() + self.optimizer.len() + 64);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(header.len() as u64).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&self.model);
        out.extend_from_slice(&self.optimizer);
        for part in self.allocation.iter().flatten() {
            out.extend(part.iter().flat_map(|x| x.to_le_bytes()));
        }
        let mut mac = seal(key);
        mac.update(&out);
        out.extend_from_slice(&mac.finalize().into_bytes());
        Ok(out)
    }

    /// Saves atomically, sealed with the run's MAC key.
    pub fn save(&self, path: &Path, key: &SecretKey) -> Result<()> {
        write_atomic(path, &self.to_bytes(key)?, PUBLIC)
    }

    /// Loads a checkpoint, refusing one whose MAC (under the run's `key`), magic or lengths do
    /// not hold.
    pub fn load(path: &Path, key: &SecretKey) -> Result<Self> {
        let bytes = read_regular(path, dp_data::memory::budget())?;
        if bytes.starts_with(OLD_MAGIC) {
            return Err(err(
                path,
                "written by an older dptrain, which kept the run's keys in it: it cannot be resumed",
            ));
        }
        if bytes.len() < MAGIC.len() + 8 + MAC_BYTES || &bytes[..MAGIC.len()] != MAGIC {
            return Err(err(path, "not a dptrain checkpoint of this version"));
        }
        let (body, tag) = bytes.split_at(bytes.len() - MAC_BYTES);
        let mut mac = seal(key);
        mac.update(body);
        if mac.verify_slice(tag).is_err() {
            return Err(err(
                path,
                "its MAC does not verify under the run's key: the file is damaged, was edited, or belongs to another run",
            ));
        }
        let mut rest = &body[MAGIC.len()..];
        let len = u64::from_le_bytes(take(&mut rest, 8, "header length", path)?.try_into().unwrap_or_default());
        if len > MAX_HEADER {
            return Err(err(path, format!("a header of {len} bytes")));
        }
        let header: Header = serde_json::from_slice(take(&mut rest, len, "header", path)?)
            .map_err(|e| err(path, format!("corrupt header: {e}")))?;
        let model = take(&mut rest, header.model_bytes, "model", path)?.to_vec();
        let optimizer = take(&mut rest, header.optimizer_bytes, "optimizer", path)?.to_vec();
        let allocation = match &header.allocation {
            Some(sizes) => Some(
                sizes
                    .iter()
                    .map(|&n| {
                        let raw = take(&mut rest, (n as u64).saturating_mul(4), "allocation state", path)?;
                        Ok(raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
                    })
                    .collect::<Result<Vec<Vec<f32>>>>()?,
            ),
            None => None,
        };
        if !rest.is_empty() {
            return Err(err(path, format!("{} bytes after the last record", rest.len())));
        }
        if sha256_hex(&model) != header.model_digest {
            return Err(err(path, "the model record does not match its digest"));
        }
        Ok(Self { header, model, optimizer, allocation })
    }
}
