//! Engine errors: one line each, saying what went wrong and what to do.

use thiserror::Error;

/// Why the engine could not do what was asked.
#[derive(Debug, Error)]
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
    /// The data could not be loaded (the message names the file).
    #[error("{0}")]
    Data(String),
    /// Ctrl-C or SIGTERM stopped work that leaves nothing to resume (what was being done).
    #[error("interrupted {0}")]
    Interrupted(String),
    /// Privacy accounting refused the run (bad parameters, unreachable target, exhausted budget).
    #[error("privacy: {0}")]
    Privacy(String),
    /// An accountant refused (its error kept as the source).
    #[error("privacy: {0}")]
    Accounting(#[from] dp_accounting::AccountingError),
    /// A data set or sampler refused (its error kept as the source).
    #[error("{0}")]
    DataSource(#[from] dp_data::DataError),
    /// Training diverged (NaN or infinite loss).
    #[error("training diverged: {0}")]
    Diverged(String),
    /// A checkpoint does not fit the run it would continue (the check that failed).
    #[error("cannot resume: {0}")]
    Resume(String),
    /// A checkpoint's sampler could not be replayed from the run's key (its error kept).
    #[error("cannot resume: {0}")]
    ResumeSampler(#[source] dp_data::DataError),
    /// A checkpoint could not be written, or was refused, for an engine error (kept as the
    /// source).
    #[error("checkpoint {path}: {source}")]
    CheckpointRefused {
        /// The checkpoint file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: Box<EngineError>,
    },
    /// A checkpoint could not be written or read.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The checkpoint file.
        path: std::path::PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// Result with [`EngineError`].
pub type Result<T> = std::result::Result<T, EngineError>;

impl EngineError {
    /// This error, as the reason the checkpoint `path` could not be written or was refused.
    pub fn of_checkpoint(self, path: &std::path::Path) -> Self {
        EngineError::CheckpointRefused { path: path.to_path_buf(), source: Box::new(self) }
    }

    /// An invalid-parameter error.
    pub fn invalid(name: &'static str, reason: impl Into<String>) -> Self {
        EngineError::InvalidParameter { name, reason: reason.into() }
    }
}

/// `text` on one line (a library's multi-line message inside a one-line error).
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
