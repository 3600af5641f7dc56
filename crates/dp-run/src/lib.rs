//! A DP training run kept in a folder, for any dp-engine model: the lock (one process per
//! folder), the key file (the run's secrets, owner-only, removed when it completes), sealed
//! checkpoints written atomically, resume after Ctrl-C or a kill with every privacy-relevant
//! field checked, the evaluation cadence, metrics, curves, the final report, and, as options,
//! parameter averaging and a one-run audit. `dptrain train` is one program built on it.
//!
//! A Burn user's DP loop (`PrivacyEngine::make_private` and `step` until done) becomes a run
//! that survives a kill:
//!
//! ```no_run
//! # use dp_engine::privacy::PrivacyConfig;
//! # use dp_engine::privacy::mechanism::gaussian::Gaussian;
//! # use dp_engine::lots::LotSource;
//! # use dp_run::{Run, RunFolder, RunOptions};
//! # fn demo<M: burn::module::Module>(model: M, lots: &dyn LotSource<M>, accuracy: impl Fn(&M) -> dp_engine::Result<f64>) -> dp_engine::Result<()> {
//! let device = burn::tensor::Device::flex();
//! let privacy = PrivacyConfig::new(Gaussian).with_target_epsilon(3.0).with_lot_size(256).with_epochs(3.0);
//! let folder = RunFolder::open("runs/mine", None)?; // continues the run there, if unfinished
//! let options = RunOptions { interrupt: Some(dp_run::interrupt::install()), ..RunOptions::default() };
//! let report = Run::new(folder, privacy, 0.5, accuracy)
//!     .with_options(options)
//!     .train(model, burn::optim::SgdConfig::new().init(), lots, &device)?;
//! println!("{:.2}% at {}", report.test_accuracy * 100.0, report.privacy); // ... (delta 1e-5, rdp, certified)
//! # Ok(()) }
//! ```
//!
//! Resuming on the CPU in a program built with Burn's GPU backends: Burn 0.22's optimiser
//! (`ModuleOptimizer::load_record`) restores its state on Burn's default device, which is the
//! first GPU backend compiled in, whatever device the model is on; run the program with
//! `BURN_DEVICE=flex` (as `dptrain` sets for itself) where that GPU cannot open, or
//! `PrivacyEngine::resume` refuses in one line saying so.

#![warn(missing_docs)]

pub mod curves;
pub mod folder;
pub mod interrupt;
pub mod model_file;
pub mod owner_key;
pub mod provenance;
pub mod seal;
pub mod search;

mod audit;
mod event;
mod options;
mod report;
mod run;
mod session;
mod speaker;
mod step_loop;

/// What a program keeping its DP run in a folder needs, in one import: dp-engine's prelude and
/// the run's types.
pub mod prelude {
    pub use crate::{Event, Run, RunFolder, RunOptions, RunReport};
    pub use dp_engine::prelude::*;
}

pub use event::Event;
pub use folder::RunFolder;
pub use options::{CHECKPOINT_EVERY, CHECKPOINT_INTERVAL, RunOptions};
pub use report::RunReport;
pub use run::Run;
