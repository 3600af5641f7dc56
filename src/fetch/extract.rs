//! CIFAR-10's binary batches out of its verified tar.gz: only the six files the loader reads,
//! each of exactly 10,000 records, written under their own names into a temporary folder that is
//! renamed into place whole (no entry of the archive chooses a path).

use dp_engine::error::{EngineError, Result};
use flate2::read::GzDecoder;
use std::fs::File;
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

/// True when `dir` holds every batch at its size.
pub fn unpacked(dir: &Path) -> bool {
    FILES.iter().all(|f| std::fs::metadata(dir.join(BATCHES).join(f)).is_ok_and(|m| m.len() == BATCH_BYTES))
}

/// Unpacks the batches of `archive` into `dir`/cifar-10-batches-bin.
pub fn unpack(archive: &Path, dir: &Path) -> Result<()> {
    let fail = |reason: String| EngineError::Data(format!("unpacking {}: {reason}", archive.display()));
    let staging: PathBuf = dir.join(format!("{BATCHES}.partial"));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| fail(e.to_string()))?;
    let file = File::open(archive).map_err(|e| fail(e.to_string()))?;
    let mut tar = tar::Archive::new(GzDecoder::new(file));
    let mut found = 0;
    for entry in tar.entries().map_err(|e| fail(e.to_string()))? {
        let mut entry = entry.map_err(|e| fail(e.to_string()))?;
        let path = entry.path().map_err(|e| fail(e.to_string()))?.into_owned();
        let Some(name) = FILES.iter().find(|f| path == Path::new(BATCHES).join(f)) else { continue };
        if entry.size() != BATCH_BYTES {
            return Err(fail(format!("{name} holds {} bytes, not {BATCH_BYTES}", entry.size())));
        }
        let mut bytes = Vec::with_capacity(BATCH_BYTES as usize);
        (&mut entry).take(BATCH_BYTES).read_to_end(&mut bytes).map_err(|e| fail(e.to_string()))?;
        std::fs::write(staging.join(name), bytes).map_err(|e| fail(e.to_string()))?;
        found += 1;
    }
    if found != FILES.len() {
        return Err(fail(format!("{found} of the {} batches found", FILES.len())));
    }
    let target = dir.join(BATCHES);
    let _ = std::fs::remove_dir_all(&target);
    std::fs::rename(&staging, &target).map_err(|e| fail(e.to_string()))
}
