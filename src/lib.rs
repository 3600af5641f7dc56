//! The `dptrain` app on the dp-engine and dp-run libraries: the CLI's model zoo (`zoo`), its run
//! settings (`train_config`), its trainer (`trainer`: the zoo model and its data handed to a
//! `dp_run::Run`, which owns the run folder, sealed checkpoints and resume) and its batch-time
//! benchmark (`bench`), and the synthetic pretraining images (`synthetic`). Everything here uses the libraries' public API only: a user's own
//! program sets up the same run with `dp_run::Run`, as `trainer::train` does.

#![warn(missing_docs)]

pub mod bench;
pub mod cache_dir;
pub mod cache_key;
pub mod fetch;
pub mod scattered;
pub mod search_folder;
pub mod search_space;
pub mod synthetic;
pub mod train_config;
pub mod trainer;
pub mod tune;
pub mod zoo;
