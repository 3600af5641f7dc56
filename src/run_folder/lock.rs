//! One run per folder at a time: an exclusive advisory lock on the folder's `lock` file, held
//! for the whole run (fresh, resumed or overwriting) and released when the process ends, even
//! by `kill -9`. Two runs in one folder would draw the same noise twice and interleave their
//! files.

use super::files::{OWNER_ONLY, folder_error, open, regular};
use dp_engine::error::Result;
use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The lock file's name in the run folder.
pub const LOCK_FILE: &str = "lock";

/// The held lock of a run folder (released on drop).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

impl RunLock {
    /// Creates `run_dir` if needed and takes its lock, refused while another process holds it.
    pub fn acquire(run_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(run_dir).map_err(|e| folder_error(run_dir, e))?;
        let path = run_dir.join(LOCK_FILE);
        let file = open(&path, OpenOptions::new().read(true).write(true).create(true).mode(OWNER_ONLY))?;
        regular(&file, &path)?;
        match file.try_lock() {
            Ok(()) => Ok(Self { _file: file }),
            Err(TryLockError::WouldBlock) => Err(folder_error(
                run_dir,
                "another dptrain process is running in this folder (it holds its lock): wait for it to end, or give another --out-dir",
            )),
            Err(TryLockError::Error(e)) => Err(folder_error(&path, e)),
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
        assert!(e.contains("another dptrain process"), "{e}");
        drop(first);
        RunLock::acquire(&run).unwrap();
    }
}
