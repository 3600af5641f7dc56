//! `dptrain data fetch`: a dataset downloaded from where it is published into the cache
//! (`DPTRAIN_CACHE_DIR`, else the XDG cache folder) or a folder of the user's, each file verified
//! against its published SHA-256 before it takes its name (`download`), resumable, and found
//! there afterwards by `--dataset` without `--data-dir`.

pub mod download;
pub mod extract;
pub mod remote;

use crate::cache_dir::cache_dir;
use download::{Fetched, download};
use dp_data::DatasetName;
use dp_engine::error::Result;
use remote::remote;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a fetch gets its files.
#[derive(Debug, Clone)]
pub struct Source {
    /// The URL the file names are appended to (None: where the dataset is published).
    pub mirror: Option<String>,
    /// How long a silent server is waited for.
    pub timeout: Duration,
}

/// The folder `name` is fetched into by default.
pub fn default_folder(name: DatasetName) -> Option<PathBuf> {
    cache_dir().map(|c| c.join("datasets").join(remote(name).folder))
}

/// True when `dir` holds all of `name`'s files (verified, or unpacked).
pub fn complete(name: DatasetName, dir: &Path) -> bool {
    let r = remote(name);
    if r.archive { extract::unpacked(dir) } else { r.files.iter().all(|f| download::verified(&dir.join(f.name), f)) }
}

/// Fetches `name` into `dir` from `source`; `progress` is told (file, bytes so far, bytes in
/// all). True when something was downloaded, false when everything was already there.
pub fn fetch(name: DatasetName, dir: &Path, source: &Source, progress: &mut dyn FnMut(&str, u64, u64)) -> Result<bool> {
    let r = remote(name);
    if r.archive && extract::unpacked(dir) {
        return Ok(false);
    }
    std::fs::create_dir_all(dir).map_err(|e| dp_engine::error::EngineError::Data(format!("{}: {e}", dir.display())))?;
    let base = source.mirror.as_deref().unwrap_or(r.base).trim_end_matches('/');
    let mut downloaded = false;
    for file in r.files {
        let url = format!("{base}/{}", file.name);
        let got = download(&url, file, dir, source.timeout, &mut |done, all| progress(file.name, done, all))?;
        downloaded |= got == Fetched::Downloaded;
    }
    if r.archive {
        let archive = dir.join(r.files[0].name);
        extract::unpack(&archive, dir)?;
        let _ = std::fs::remove_file(archive);
        downloaded = true;
    }
    Ok(downloaded)
}
