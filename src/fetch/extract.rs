//! CIFAR-10's binary batches out of its verified tar.gz: only the six files the loader reads,
//! each of exactly 10,000 records, written under their own names into a temporary folder that is
//! renamed into place whole (no entry of the archive chooses a path). Each batch's SHA-256 is
//! recorded at unpacking in `SHA256SUMS`, sealed by the cache folder's key
//! (`crate::cache_key`), and checked on reuse: six files of the right sizes are not enough
//! (six all-zero ones used to pass as "already there, verified").

use super::download::digest_of;
use dp_data::SecretKey;
use dp_data::safe_files::{OWNER_ONLY, PUBLIC, open, read_regular, regular, write_atomic};
use dp_engine::error::{EngineError, Result};
use dp_run::seal::{seal, verifies};
use flate2::read::GzDecoder;
use sha2::{Digest, Sha256};
use std::fs::OpenOptions;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The folder the batches go to, inside the dataset's folder.
pub const BATCHES: &str = "cifar-10-batches-bin";
/// The batches the loader reads.
pub const FILES: [&str; 6] = [
    "data_batch_1.bin",
    "data_batch_2.bin",
    "data_batch_3.bin",
    "data_batch_4.bin",
    "data_batch_5.bin",
    "test_batch.bin",
];
/// Bytes of one batch: 10,000 records of a label byte and 3,072 pixel bytes.
pub const BATCH_BYTES: u64 = 10_000 * (1 + 3 * 32 * 32);

/// The digests' file in the batches' folder: one `hex  name` line per batch, then the seal.
const SUMS: &str = "SHA256SUMS";

/// The hex SHA-256 of the batch `path`, None unless it is a regular file of [`BATCH_BYTES`].
fn batch_digest(path: &Path) -> Option<String> {
    match digest_of(path, BATCH_BYTES) {
        Ok(Some((hash, BATCH_BYTES))) => Some(hex::encode(hash.finalize())),
        _ => None,
    }
}

/// The digests' lines of `digests` (in [`FILES`]' order).
fn sums_text(digests: &[String]) -> String {
    FILES.iter().zip(digests).map(|(name, d)| format!("{d}  {name}\n")).collect()
}

/// True when `dir` holds every batch with the digest recorded, under `key`'s seal, when it
/// was unpacked.
pub fn unpacked(dir: &Path, key: &SecretKey) -> bool {
    let batches = dir.join(BATCHES);
    let Ok(bytes) = read_regular(&batches.join(SUMS), 4096) else { return false };
    let Some((text, tag)) = bytes.split_last_chunk::<64>() else { return false };
    let Some(tag) = std::str::from_utf8(tag).ok().and_then(|t| hex::decode(t).ok()) else { return false };
    if !verifies(key, &[text], &tag) {
        return false;
    }
    let digests: Option<Vec<String>> = FILES.iter().map(|f| batch_digest(&batches.join(f))).collect();
    digests.is_some_and(|d| sums_text(&d).as_bytes() == text)
}

/// Unpacks the batches of `archive` into `dir`/cifar-10-batches-bin, with their digests sealed
/// by `key`.
pub fn unpack(archive: &Path, dir: &Path, key: &SecretKey) -> Result<()> {
    let fail = |reason: String| EngineError::data(format!("unpacking {}: {reason}", archive.display()));
    let staging: PathBuf = dir.join(format!("{BATCHES}.partial"));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| fail(e.to_string()))?;
    let file = open(archive, OpenOptions::new().read(true))?;
    regular(&file, archive)?;
    let mut tar = tar::Archive::new(GzDecoder::new(file));
    let mut digests = vec![String::new(); FILES.len()];
    let mut found = 0;
    for entry in tar.entries().map_err(|e| fail(e.to_string()))? {
        let mut entry = entry.map_err(|e| fail(e.to_string()))?;
        let path = entry.path().map_err(|e| fail(e.to_string()))?.into_owned();
        let Some(k) = FILES.iter().position(|f| path == Path::new(BATCHES).join(f)) else { continue };
        let name = FILES[k];
        if entry.size() != BATCH_BYTES {
            return Err(fail(format!("{name} holds {} bytes, not {BATCH_BYTES}", entry.size())));
        }
        let mut bytes = Vec::with_capacity(BATCH_BYTES as usize);
        (&mut entry).take(BATCH_BYTES).read_to_end(&mut bytes).map_err(|e| fail(e.to_string()))?;
        digests[k] = hex::encode(Sha256::digest(&bytes));
        write_atomic(&staging.join(name), &bytes, PUBLIC)?;
        found += 1;
    }
    if found != FILES.len() || digests.iter().any(String::is_empty) {
        return Err(fail(format!("{found} of the {} batches found", FILES.len())));
    }
    let text = sums_text(&digests);
    let tag = hex::encode(seal(key, &[text.as_bytes()]));
    write_atomic(&staging.join(SUMS), format!("{text}{tag}").as_bytes(), OWNER_ONLY)?;
    let target = dir.join(BATCHES);
    let _ = std::fs::remove_dir_all(&target);
    std::fs::rename(&staging, &target).map_err(|e| fail(e.to_string()))
}
