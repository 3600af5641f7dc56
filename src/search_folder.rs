//! The folder `dptrain tune` keeps a search in: its private state (`search-state/`, the journal:
//! K and every candidate), the released choice (`chosen/`) and its report. A search and a
//! training run never share a folder: each would take the other's files for its own (a search's
//! resume replaced a run's report.json, a run's `--overwrite` a search's).

use dp_data::safe_files::occupied;
use dp_engine::error::{EngineError, Result};
use std::path::Path;

/// The search's private folder (its journal) inside its output folder.
pub const STATE_DIR: &str = "search-state";
/// The folder the chosen candidate's model is released in.
pub const CHOSEN_DIR: &str = "chosen";

/// Refuses to train a fresh run in `dir` when it holds a search (stopped or complete).
pub fn refuse_search(dir: &Path) -> Result<()> {
    match [STATE_DIR, CHOSEN_DIR].into_iter().find(|d| occupied(&dir.join(d))) {
        Some(held) => Err(EngineError::invalid(
            "out dir",
            format!(
                "{} holds a search ({held}/): a run there would mix its files with the search's; give the run a folder of its own",
                dir.display()
            ),
        )),
        None => Ok(()),
    }
}

/// Refuses to search in `dir` when it holds a training run's files.
pub fn refuse_run(dir: &Path) -> Result<()> {
    let held = dp_run::folder::run_files(dir);
    // A search writes its own report.json: that alone is not a run's.
    let held: Vec<&str> = held.into_iter().filter(|f| *f != dp_run::folder::REPORT_FILE).collect();
    match held.is_empty() {
        true => Ok(()),
        false => Err(EngineError::invalid(
            "out dir",
            format!(
                "{} holds a training run ({}): a search there would replace its files; give the search a folder of its own",
                dir.display(),
                held.join(", ")
            ),
        )),
    }
}
