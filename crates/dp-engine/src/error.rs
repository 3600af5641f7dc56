//! Engine errors: one line each, saying what went wrong and what to do.

use thiserror::Error;

/// Why the engine could not do what was asked.
#[derive(Error)]
pub enum EngineError {
    /// A configuration value is out of range or inconsistent.
    #[error("invalid {name}: {reason}")]
    InvalidParameter {
        /// The user-facing name of the parameter.
        name: &'static str,
        /// What it must satisfy.
        reason: String,
    },
    /// A model asks for a layer that has no DP implementation.
    #[error("{0}")]
    Unsupported(String),
    /// A parameter was used twice in one forward pass (weight sharing): its per-example gradient
    /// would need both uses' contributions before the norm. `ParamTable::name_shared` gives its
    /// path.
    #[error(
        "parameter {} is used twice in one forward pass (weight sharing; the second use is a {layer}): \
         per-example gradients of shared weights are not supported, give each use its own layer",
        path.as_ref().map_or_else(|| id.to_string(), |p| format!("`{p}`"))
    )]
    SharedParameter {
        /// The parameter.
        id: burn::module::ParamId,
        /// Its path in the model, once named.
        path: Option<String>,
        /// The type of the layer that used it the second time.
        layer: &'static str,
    },
    /// The requested device cannot be used.
    #[error(transparent)]
    Device(#[from] dp_kernels::backend::DeviceError),
    /// The data could not be used (the message names the file, or what is missing), with a
    /// data set's or sampler's own error kept as the source where one refused.
    #[error("{reason}")]
    Data {
        /// What went wrong.
        reason: String,
        /// The data set's error, where it came from one.
        #[source]
        source: Option<dp_data::DataError>,
    },
    /// Ctrl-C or SIGTERM stopped work that leaves nothing to resume (what was being done).
    #[error("interrupted {0}")]
    Interrupted(String),
    /// Privacy refused the run (bad parameters, an unreachable target, an exhausted budget, a
    /// mechanism without its noise), with an accountant's own error kept as the source.
    #[error("privacy: {reason}")]
    Privacy {
        /// What went wrong.
        reason: String,
        /// The accountant's error, where it came from one.
        #[source]
        source: Option<dp_accounting::AccountingError>,
    },
    /// Training diverged (NaN or infinite loss).
    #[error("training diverged: {0}")]
    Diverged(String),
    /// A checkpoint does not fit the run it would continue (the check that failed), or its
    /// sampler could not be replayed from the run's key (the data error kept as the source).
    #[error("cannot resume: {reason}")]
    Resume {
        /// The check that failed.
        reason: String,
        /// The sampler's error, where it came from one.
        #[source]
        source: Option<dp_data::DataError>,
    },
    /// A checkpoint could not be written or read, or was refused for an engine error (kept as
    /// the source).
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The checkpoint file.
        path: std::path::PathBuf,
        /// What went wrong.
        reason: String,
        /// The engine's error, where the checkpoint was refused for one.
        #[source]
        source: Option<Box<EngineError>>,
    },
}

/// Shown as its message: `fn main() -> Result<(), EngineError>` (or a boxed error) then ends in the
/// one line the message is, where Rust prints a returned error with `Debug`.
impl std::fmt::Debug for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl From<dp_data::DataError> for EngineError {
    fn from(error: dp_data::DataError) -> Self {
        EngineError::Data { reason: error.to_string(), source: Some(error) }
    }
}

impl From<dp_accounting::AccountingError> for EngineError {
    fn from(error: dp_accounting::AccountingError) -> Self {
        EngineError::Privacy { reason: error.to_string(), source: Some(error) }
    }
}

/// Result with [`EngineError`].
pub type Result<T> = std::result::Result<T, EngineError>;

impl EngineError {
    /// This error, as the reason the checkpoint `path` could not be written or was refused.
    pub fn of_checkpoint(self, path: &std::path::Path) -> Self {
        EngineError::Checkpoint { path: path.to_path_buf(), reason: self.to_string(), source: Some(Box::new(self)) }
    }

    /// The checkpoint `path` could not be written or read, for `reason`.
    pub fn checkpoint(path: &std::path::Path, reason: impl Into<String>) -> Self {
        EngineError::Checkpoint { path: path.to_path_buf(), reason: reason.into(), source: None }
    }

    /// Data that could not be used, for `reason`.
    pub fn data(reason: impl Into<String>) -> Self {
        EngineError::Data { reason: reason.into(), source: None }
    }

    /// A privacy refusal, for `reason`.
    pub fn privacy(reason: impl Into<String>) -> Self {
        EngineError::Privacy { reason: reason.into(), source: None }
    }

    /// A resume refused, for `reason`.
    pub fn resume(reason: impl Into<String>) -> Self {
        EngineError::Resume { reason: reason.into(), source: None }
    }

    /// A resume refused because the checkpoint's sampler could not be replayed.
    pub fn resume_sampler(error: dp_data::DataError) -> Self {
        EngineError::Resume { reason: error.to_string(), source: Some(error) }
    }

    /// An invalid-parameter error.
    pub fn invalid(name: &'static str, reason: impl Into<String>) -> Self {
        EngineError::InvalidParameter { name, reason: reason.into() }
    }
}

/// `text` on one line (a library's multi-line message inside a one-line error).
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
