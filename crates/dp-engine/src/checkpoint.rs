//! Checkpoints: one binary file holding the model and optimiser as Burn records (burnpack), the
//! optimized mechanism's allocation state as raw f32, and a JSON header with the run's
//! configuration, privacy ledger, sampler and noise-stream positions; a SHA-256 digest of all of
//! it ends the file. Written atomically (temporary file, fsync, rename), so a run killed at any
//! moment resumes from a complete state. Loading checks the digest; what the privacy claim
//! depends on is then checked against the run by the trainer (`run::resume`).
//!
//! Layout: `DPTCKPT2` | header length (u64 LE) | header JSON | model | optimiser | released | digest.

use crate::error::{EngineError, Result};
use crate::tensor_io::to_host;
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;
use dp_accounting::PrivacyLedger;
use dp_data::{ChaChaState, LotSampler};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The first bytes of every checkpoint.
const MAGIC: &[u8; 8] = b"DPTCKPT2";
/// Bytes of the SHA-256 digest at the end.
const DIGEST: usize = 32;
/// The largest header accepted (a header is a few kilobytes; this bounds what a damaged length
/// field can make the loader allocate).
const MAX_HEADER: u64 = 64 << 20;

/// Everything in a checkpoint but the tensors.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// SHA-256 of the run folder's config.toml (the run's configuration), which this checkpoint
    /// belongs to.
    pub config_digest: String,
    /// Steps the run plans in total.
    pub planned_steps: u64,
    /// Steps taken so far.
    pub step: u64,
    /// Every privatised step taken so far.
    pub ledger: PrivacyLedger,
    /// Lot sampler (including its random stream).
    pub sampler: LotSampler,
    /// Noise stream position (None for the unperturbed baseline).
    pub noise: Option<ChaChaState>,
    /// Training seconds so far.
    pub seconds: f64,
    /// Bytes of the model record.
    pub model_bytes: u64,
    /// Bytes of the optimiser record.
    pub optimizer_bytes: u64,
    /// Scalars of each parameter's average released gradient (optimized only).
    pub released: Option<Vec<usize>>,
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
    /// The optimized mechanism's average released gradient, per parameter.
    pub released: Option<Vec<Vec<f32>>>,
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
    hash.0.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn err(path: &Path, reason: impl ToString) -> EngineError {
    EngineError::Checkpoint { path: path.to_path_buf(), reason: reason.to_string() }
}

/// Writes `bytes` to `path` atomically: a crash leaves either the old file or the new one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    };
    write().map_err(|e| err(path, e))
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
    /// The file's bytes.
    fn to_bytes(&self) -> Result<Vec<u8>> {
        let header = serde_json::to_vec(&self.header).map_err(|e| EngineError::invalid("checkpoint", e.to_string()))?;
        let mut out = Vec::with_capacity(header.len() + self.model.len() + self.optimizer.len() + 64);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(header.len() as u64).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&self.model);
        out.extend_from_slice(&self.optimizer);
        for part in self.released.iter().flatten() {
            out.extend(part.iter().flat_map(|x| x.to_le_bytes()));
        }
        let digest = Sha256::digest(&out);
        out.extend_from_slice(&digest);
        Ok(out)
    }

    /// Saves atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        write_atomic(path, &self.to_bytes()?)
    }

    /// Loads a checkpoint, refusing one whose digest, magic or lengths do not hold.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = fs::read(path).map_err(|e| err(path, e))?;
        if bytes.len() < MAGIC.len() + 8 + DIGEST || &bytes[..MAGIC.len()] != MAGIC {
            return Err(err(
                path,
                "not a dptrain checkpoint of this version (a run from an older dptrain cannot be resumed)",
            ));
        }
        let (body, digest) = bytes.split_at(bytes.len() - DIGEST);
        if Sha256::digest(body).as_slice() != digest {
            return Err(err(path, "damaged: its digest does not match its contents"));
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
        let released = match &header.released {
            Some(sizes) => Some(
                sizes
                    .iter()
                    .map(|&n| {
                        let raw = take(&mut rest, (n as u64).saturating_mul(4), "released gradient", path)?;
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
        Ok(Self { header, model, optimizer, released })
    }
}
