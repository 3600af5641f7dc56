//! ERM errors: each says which parameter or condition failed and what to change.

use thiserror::Error;

/// Why an ERM run could not proceed.
#[derive(Debug, Error)]
pub enum ErmError {
    /// A user-facing parameter is out of range.
    #[error("invalid {name}: {reason}")]
    InvalidParameter {
        /// The flag or setting.
        name: &'static str,
        /// What it must satisfy.
        reason: String,
    },
    /// The method's theorem does not cover this model or setting; the run is refused.
    #[error("{method} refused: {reason}")]
    Refused {
        /// The method.
        method: &'static str,
        /// The violated condition.
        reason: String,
    },
    /// A privacy bound or calibration failed.
    #[error(transparent)]
    Accounting(#[from] dp_accounting::AccountingError),
    /// Data could not be loaded or split.
    #[error(transparent)]
    Data(#[from] dp_data::DataError),
    /// A numerical procedure failed (diverged, not positive definite, not finite).
    #[error("{0}")]
    Numerical(String),
    /// A report or plot could not be written.
    #[error("cannot write {path}: {reason}")]
    Output {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// Result alias of the ERM crate.
pub type Result<T> = std::result::Result<T, ErmError>;
