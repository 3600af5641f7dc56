//! Data errors: every message names the file and says what is wrong with it.

use std::path::PathBuf;
use thiserror::Error;

/// Why a dataset could not be loaded or sampled.
#[derive(Error)]
pub enum DataError {
    /// The file could not be read at all.
    #[error("cannot read {path}: {reason}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's reason (in the message, not also a `source()`, which would
        /// make an error chain print it twice).
        reason: std::io::Error,
    },
    /// A file that cannot be used as it is (a link, a FIFO, a device, too large, unwritable): the
    /// `safe_files` boundary.
    #[error("{path}: {reason}")]
    File {
        /// The file or folder.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The file was read but its content is not what the format requires.
    #[error("{path}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A size from a file or a flag needs more memory than the run may plan to use.
    #[error(
        "{what} would need {need}, beyond the memory budget of {budget} (3/4 of this machine's memory; set DPTRAIN_MEMORY_BUDGET in bytes to change it)"
    )]
    OverBudget {
        /// What was to be allocated.
        what: String,
        /// How much it needs.
        need: String,
        /// The budget.
        budget: String,
    },
    /// A parameter (sampling rate, lot size...) is out of range.
    #[error("invalid {name}: {reason}")]
    InvalidParameter {
        /// The parameter's user-facing name.
        name: &'static str,
        /// What it must satisfy.
        reason: String,
    },
}

/// Shown as its message: `fn main() -> Result<(), DataError>` (or a boxed error) then ends in the
/// one line the message is, where Rust prints a returned error with `Debug`.
impl std::fmt::Debug for DataError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl DataError {
    /// A corrupt-file error for `path`.
    pub fn corrupt(path: &std::path::Path, reason: impl Into<String>) -> Self {
        DataError::Corrupt { path: path.to_path_buf(), reason: reason.into() }
    }
}

/// Result alias of the data crate.
pub type Result<T> = std::result::Result<T, DataError>;
