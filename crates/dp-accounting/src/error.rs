//! The one error type of the accounting crate: every message is a full sentence a user can act on.

use thiserror::Error;

/// Why an accounting request could not be answered.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum AccountingError {
    /// A parameter is outside the range where the mechanism or theorem is defined.
    #[error("invalid {name}: {value} ({requirement})")]
    InvalidParameter {
        /// The parameter's user-facing name.
        name: &'static str,
        /// The rejected value, as given.
        value: String,
        /// What the value must satisfy.
        requirement: &'static str,
    },
    /// The requested privacy target cannot be met by any admissible noise level.
    #[error("target unreachable: {0}")]
    Unreachable(String),
    /// The accountant has no way to compute with this kind of release.
    #[error("unsupported release: {0}")]
    Unsupported(String),
    /// A name that is none of a closed set's (an accountant, a grid, a conversion).
    #[error("unknown name '{name}', expected one of {expected}")]
    Unknown {
        /// The name given.
        name: String,
        /// The names there are, quoted and comma-separated.
        expected: String,
    },
    /// The numerical method cannot give a trustworthy answer for these inputs.
    #[error("numerical limit: {0}")]
    Numerical(String),
}

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, AccountingError>;
