//! dptrain's end-to-end tests as one binary (each file a module; ripgrep's `tests/tests.rs`):
//! one link of Burn instead of one per file.

mod common;

#[path = "../crates/dp-engine/tests/oracle/mod.rs"]
mod oracle;

mod augmult_oracle;
mod cli;
mod docs;
mod erm;
mod fetch;
mod fuzz;
mod model_file;
mod module_graph;
mod own_data;
mod run_folder;
mod train;
mod tune;
mod zoo_step_oracle;
mod zoo_weights;
