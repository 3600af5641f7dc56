//! Privacy accounting for differentially private training: sound accountants (RDP, PRV, analytic
//! Gaussian) that certify epsilons, calibration of the noise multiplier to a target, and the
//! papers' own bounds labelled as such. Pure Rust; no Burn.
//!
//! ```
//! use dp_accounting::{Accountant, Guarantee, PrivacyLedger, RdpAccountant};
//!
//! // The MNIST DP-SGD tutorial run: noise multiplier 1.1, batch 256 of 60,000, 14,062 steps.
//! let ledger = PrivacyLedger::homogeneous(1.1, 256.0 / 60000.0, 14_062)?;
//! let report = RdpAccountant::default().epsilon(&ledger, 1e-5)?;
//! assert_eq!(report.guarantee, Guarantee::Certified);
//! assert!((report.epsilon - 2.5966).abs() < 1e-4);
//! # Ok::<(), dp_accounting::AccountingError>(())
//! ```

#![warn(missing_docs)]

pub mod accountant;
pub mod analytic_gaussian;
pub mod audit;
pub mod calibrate;
pub mod composition;
pub mod error;
pub mod event;
pub mod ledger;
pub mod paper_bounds;
pub mod prv;
pub mod rdp;
pub mod registry;
pub mod repeat_and_select;
pub mod report;
pub mod search;
pub mod special;
pub mod validate;

pub use accountant::Accountant;
pub use analytic_gaussian::AnalyticGaussianAccountant;
pub use calibrate::{Calibration, calibrate_noise_multiplier};
pub use composition::BasicComposition;
pub use error::{AccountingError, Result};
pub use event::{DpEvent, GaussianSteps, LotSampling};
pub use ledger::PrivacyLedger;
pub use prv::PrvAccountant;
pub use rdp::{Conversion, OrderGrid, RdpAccountant};
pub use registry::{AccountantName, AccountantOptions, Choice};
pub use repeat_and_select::Repetitions;
pub use report::{Guarantee, PrivacyReport};
