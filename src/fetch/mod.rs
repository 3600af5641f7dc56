//! `dptrain data fetch`: a dataset downloaded from where it is published into the cache
//! (`DPTRAIN_CACHE_DIR`, else the XDG cache folder) or a folder of the user's, each file verified
//! against its published SHA-256 before it takes its name (`download`), resumable, and found
//! there afterwards by `--dataset` without `--data-dir`.

pub mod download;
pub mod extract;
pub mod remote;

use crate::cache_dir::cache_dir;
use crate::cache_key::cache_key;
use download::{Fetched, Timeouts, download};
use dp_data::DatasetName;
use dp_data::SecretKey;
use dp_data::safe_files::file_error;
use dp_engine::error::{EngineError, Result};
use remote::remote;
use std::path::{Path, PathBuf};

/// Where a fetch gets its files.
#[derive(Debug, Clone)]
pub struct Source {
    /// The URL the file names are appended to (None: where the dataset is published).
    pub mirror: Option<String>,
    /// How long a silent server is waited for, and a whole transfer.
    pub timeouts: Timeouts,
}

/// The key that seals the digests of unpacked archives: the cache folder's.
fn unpacking_key() -> Result<SecretKey> {
    let dir = cache_dir().ok_or_else(|| {
        EngineError::data("no cache folder for the key that seals unpacked data (set DPTRAIN_CACHE_DIR or HOME)")
    })?;
    cache_key(&dir)
}

/// The folder `name` is fetched into by default.
pub fn default_folder(name: DatasetName) -> Option<PathBuf> {
    Some(cache_dir()?.join("datasets").join(remote(name).ok()?.folder))
}

/// True when `dir` holds all of `name`'s files, verified (unpacked ones against the digests
/// recorded at unpacking).
pub fn complete(name: DatasetName, dir: &Path) -> bool {
    let Ok(r) = remote(name) else { return false };
    if r.archive {
        unpacking_key().is_ok_and(|key| extract::unpacked(dir, &key))
    } else {
        r.files.iter().all(|f| download::verified(&dir.join(f.name), f).unwrap_or(false))
    }
}

/// Fetches `name` into `dir` from `source`; `progress` is told (file, bytes so far, bytes in
/// all). True when something was downloaded, false when everything was already there.
pub fn fetch(name: DatasetName, dir: &Path, source: &Source, progress: &mut dyn FnMut(&str, u64, u64)) -> Result<bool> {
    let r = remote(name)?;
    let key = if r.archive { Some(unpacking_key()?) } else { None };
    if let Some(key) = &key
        && extract::unpacked(dir, key)
    {
        return Ok(false);
    }
    std::fs::create_dir_all(dir).map_err(|e| file_error(dir, e))?;
    let base = source.mirror.as_deref().unwrap_or(r.base).trim_end_matches('/');
    let mut downloaded = false;
    for file in r.files {
        let url = format!("{base}/{}", file.name);
        let got = download(&url, file, dir, source.timeouts, &mut |done, all| progress(file.name, done, all))?;
        downloaded |= got == Fetched::Downloaded;
    }
    if let Some(key) = &key {
        let archive = dir.join(r.files[0].name);
        extract::unpack(&archive, dir, key)?;
        let _ = std::fs::remove_file(archive);
        downloaded = true;
    }
    Ok(downloaded)
}

/// The folder of a named dataset: `dir`; without one, where `dptrain data fetch` put it, else
/// its standard location (Debian's package), else refused with the fetch command.
pub fn data_folder(name: DatasetName, dir: Option<&Path>) -> Result<PathBuf> {
    let fetched = || default_folder(name).filter(|d| complete(name, d));
    let standard = || name.default_dir().filter(|d| d.is_dir());
    if let Some(dir) = dir {
        return Ok(dir.to_path_buf());
    }
    let folder = remote(name)?.folder;
    fetched().or_else(standard).ok_or_else(|| {
        EngineError::invalid(
            "data dir",
            format!("{folder} is not on this machine: run `dptrain data fetch {folder}`, or give --data-dir"),
        )
    })
}
