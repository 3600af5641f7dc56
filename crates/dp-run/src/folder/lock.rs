//! One run per folder at a time: an exclusive advisory lock on the run folder itself (its open
//! directory), held for the whole run (fresh, resumed or overwriting) and released when the
//! process ends, even by `kill -9`. Two runs in one folder would draw the same noise twice and
//! interleave their files. A lock file could be deleted under a running process, letting a
//! second one lock a new file; a folder cannot be deleted while it holds the run's files, and
//! one moved or replaced under the run is noticed before the next write ([`RunLock::held`]).

use dp_data::Result;
use dp_data::safe_files::file_error;
use std::fs::{File, TryLockError};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The held lock of a run folder (released on drop).
#[derive(Debug)]
pub struct RunLock {
    dir: File,
    path: PathBuf,
}

/// The (device, inode) of an open file or folder.
fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

impl RunLock {
    /// Creates `run_dir` if needed and takes its lock, refused while another process holds it.
    pub fn acquire(run_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(run_dir).map_err(|e| file_error(run_dir, e))?;
        let dir = File::open(run_dir).map_err(|e| file_error(run_dir, e))?;
        if !dir.metadata().map_err(|e| file_error(run_dir, e))?.is_dir() {
            return Err(file_error(run_dir, "is not a folder"));
        }
        match dir.try_lock() {
            Ok(()) => Ok(Self { dir, path: run_dir.to_path_buf() }),
            Err(TryLockError::WouldBlock) => Err(file_error(
                run_dir,
                "another program is running in this folder (it holds its lock): wait for it to end, or give another run folder",
            )),
            Err(TryLockError::Error(e)) => Err(file_error(run_dir, e)),
        }
    }

    /// Refuses to go on when the run folder's path no longer names the folder this lock holds
    /// (it was moved, or removed and made again, under the run): another process may be
    /// running there now.
    pub fn held(&self) -> Result<()> {
        let locked = self.dir.metadata().map_err(|e| file_error(&self.path, e))?;
        match std::fs::metadata(&self.path) {
            Ok(now) if identity(&now) == identity(&locked) => Ok(()),
            _ => Err(file_error(
                &self.path,
                "the run folder was moved or replaced while this run held it: stopping without writing (the folder this run locked keeps its last checkpoint)",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_until_the_first_is_released() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let first = RunLock::acquire(&run).unwrap();
        let e = RunLock::acquire(&run).unwrap_err().to_string();
        assert!(e.contains("another program is running in this folder"), "{e}");
        first.held().unwrap();
        drop(first);
        RunLock::acquire(&run).unwrap();
    }

    #[test]
    fn a_folder_replaced_under_the_run_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let first = RunLock::acquire(&run).unwrap();
        std::fs::rename(&run, dir.path().join("moved")).unwrap();
        std::fs::create_dir(&run).unwrap();
        // A second process locks the new folder; the first stops before its next write.
        let _second = RunLock::acquire(&run).unwrap();
        assert!(first.held().unwrap_err().to_string().contains("moved or replaced"));
    }
}
