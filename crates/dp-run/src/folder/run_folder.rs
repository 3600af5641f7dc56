//! A run folder opened by a program: fresh (its keys drawn, its lock taken when the run
//! starts writing) or resumed (its lock taken at once, its key file and config.toml read
//! while it is held).

use crate::folder::keys::{RunKeys, key_path};
use crate::folder::lock::RunLock;
use crate::folder::{self, parse_config};
use dp_data::safe_files::{file_error, occupied};
use dp_engine::checkpoint::StreamKeys;
use dp_engine::error::{EngineError, Result};
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// The run of a folder, fresh or resumed, before it trains ([`crate::Run`]).
#[derive(Debug)]
pub struct RunFolder {
    pub(crate) dir: PathBuf,
    pub(crate) keys: RunKeys,
    pub(crate) lock: Option<RunLock>,
    /// A resumed run's config.toml: its text and digest.
    pub(crate) resumed: Option<(String, String)>,
}

impl RunFolder {
    /// A fresh run in `dir` with keys drawn for it (from `seed` for a reproducible run, else
    /// from the OS). Nothing is written, and the folder is not locked, before the run starts.
    pub fn fresh(dir: impl AsRef<Path>, seed: Option<u64>) -> Result<Self> {
        let dir = named(dir.as_ref())?;
        Ok(Self { dir, keys: RunKeys::generate(seed), lock: None, resumed: None })
    }

    /// The run in `dir`, to continue from its checkpoint: the folder is locked from here to the
    /// run's end, and its key file and config.toml are read (the seed of a seeded run is the
    /// key file's).
    pub fn resume(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = named(dir.as_ref())?;
        if !dir.is_dir() {
            return Err(file_error(&dir, "holds no run to resume (no such folder)").into());
        }
        let lock = RunLock::acquire(&dir)?;
        let keys = folder::read_keys(&dir)?;
        let config = folder::read_config(&dir)?;
        Ok(Self { dir, keys, lock: Some(lock), resumed: Some(config) })
    }

    /// The run in `dir` continued where it stopped when the folder holds an unfinished one (its
    /// key file, which a completed run removes), else a fresh one as [`Self::fresh`] with
    /// `seed` (a resumed run keeps its own): one call for a program that resumes itself when
    /// started again after Ctrl-C, a kill or a lost machine.
    /// A seed given that is not the unfinished run's own is refused (the run goes on with its
    /// own seed, or none, whatever is given: it must not seem to follow the one given).
    pub fn open(dir: impl AsRef<Path>, seed: Option<u64>) -> Result<Self> {
        let dir = dir.as_ref();
        if !occupied(&key_path(dir)) {
            return Self::fresh(dir, seed);
        }
        let folder = Self::resume(dir)?;
        match (seed, folder.seed()) {
            (Some(given), own) if own != Some(given) => Err(EngineError::invalid(
                "seed",
                format!(
                    "{} holds an unfinished run {}, not one seeded with {given}: it continues as it started; give its own seed (or None), or another run folder",
                    dir.display(),
                    own.map_or("without a seed".to_string(), |s| format!("seeded with {s}"))
                ),
            )),
            _ => Ok(folder),
        }
    }

    /// The run's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The seed of a reproducible run.
    pub fn seed(&self) -> Option<u64> {
        self.keys.seed
    }

    /// The keys of the run's lot sampler and noise streams (a program drawing its own
    /// randomness per lot, as augmented views do, draws it from the sampler's).
    pub fn streams(&self) -> &StreamKeys {
        self.keys.streams()
    }

    /// True when the run continues from its checkpoint.
    pub fn is_resumed(&self) -> bool {
        self.resumed.is_some()
    }

    /// The settings a resumed run was started with (its config.toml, as the program gave them
    /// to [`crate::Run::with_settings`]); None for a fresh run.
    pub fn settings<C: DeserializeOwned>(&self) -> Result<Option<C>> {
        self.resumed.as_ref().map(|(text, _)| parse_config(&self.dir, text)).transpose()
    }
}

/// `dir`, refused when empty.
fn named(dir: &Path) -> Result<PathBuf> {
    if dir.as_os_str().is_empty() {
        return Err(EngineError::invalid("out dir", "is empty: name the run's folder"));
    }
    Ok(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unfinished_run_opened_with_another_seed_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        std::fs::create_dir(&dir).unwrap();
        RunFolder::fresh(&dir, Some(7)).unwrap().keys.save(&dir).unwrap();
        std::fs::write(dir.join(folder::CONFIG_FILE), "").unwrap();
        let e = RunFolder::open(&dir, Some(8)).unwrap_err().to_string();
        assert!(e.contains("seeded with 7, not one seeded with 8"), "{e}");
        drop(e);
        assert_eq!(RunFolder::open(&dir, Some(7)).unwrap().seed(), Some(7));
        assert_eq!(RunFolder::open(&dir, None).unwrap().seed(), Some(7), "None: the run's own");
        let unseeded = tmp.path().join("unseeded");
        std::fs::create_dir(&unseeded).unwrap();
        RunFolder::fresh(&unseeded, None).unwrap().keys.save(&unseeded).unwrap();
        std::fs::write(unseeded.join(folder::CONFIG_FILE), "").unwrap();
        let e = RunFolder::open(&unseeded, Some(7)).unwrap_err().to_string();
        assert!(e.contains("without a seed, not one seeded with 7"), "{e}");
    }
}
