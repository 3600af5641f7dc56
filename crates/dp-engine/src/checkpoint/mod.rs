//! A DP run's checkpoint: everything a resume needs in one Burn record file ([`DpCheckpoint`]:
//! the model and optimiser records, the ledger, the sampler's and noise stream's positions, the
//! mechanism's state) and the secret stream keys it is checked against ([`StreamKeys`], with their
//! owner-only file).

pub(crate) mod format;
pub(crate) mod keys;
pub(crate) mod restore;
pub use format::{AverageMeta, AverageRecord, DpCheckpoint, DpStateHeader, values_digest};
pub use keys::StreamKeys;
pub use restore::{Restored, restore};
