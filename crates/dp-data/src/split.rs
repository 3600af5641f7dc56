//! Which part of a dataset to load.

/// Training or test split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// The training examples (the private data).
    Train,
    /// The held-out test examples.
    Test,
}
