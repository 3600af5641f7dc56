//! The `dptrain` app on the dp-engine library: the CLI's model zoo (`zoo`), its run settings
//! (`train_config`), its trainer with run folders, sealed checkpoints and resume (`trainer`,
//! `run_folder`, `checkpoint`) and its batch-time benchmark (`bench`). Everything here uses the
//! library's public API only: a user's own program sets up the same run with
//! `dp_engine::privacy_engine::PrivacyEngine`, as `trainer::train` does.

pub mod bench;
pub mod cache_dir;
pub mod cache_key;
pub mod checkpoint;
pub mod curves;
pub mod fetch;
pub mod run_folder;
pub mod scattered;
pub mod seal;
pub mod train_config;
pub mod trainer;
pub mod zoo;
