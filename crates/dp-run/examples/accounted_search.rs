//! A Burn user's hyper-parameter search whose privacy is accounted (Papernot & Steinke, ICLR
//! 2022): a random number of candidates, each a `Run` of the resumable example's logistic
//! regression at a learning rate and lot size drawn from a grid, scored by a noisy count of
//! correct predictions on 500 private held-out examples; only the best comes back, with the
//! epsilon of the whole search (at most 2). The search's state is a sealed `Journal`: Ctrl-C
//! (or `kill -9`) it and run the same command again, and it continues where it stopped, never
//! drawing again or retraining a finished candidate.
//!
//! ```text
//! cargo run --release -p dp-run --example accounted_search -- runs/search
//! ```

#[path = "resumable_run.rs"]
#[allow(dead_code)]
pub mod resumable;

use burn::optim::SgdConfig;
use dp_accounting::repeat_and_select::Repetitions;
use dp_engine::Result;
use dp_engine::lots::image_accuracy;
use dp_run::folder::checkpoint::checkpoint_path;
use dp_run::prelude::*;
use dp_run::search::{Candidate, Journal, Score, SearchSettings, Trained, search};
use resumable::{LogReg, table};
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// A configuration of the grid: learning rate and lot size.
type Config = (f64, usize);

/// The privacy of a candidate of `config` (two epochs of its lot size): the search sets its
/// noise multiplier.
pub fn privacy(config: &Config) -> Result<PrivacyConfig> {
    Ok(PrivacyConfig::new(Gaussian).with_lot_size(config.1).with_epochs(2.0))
}

/// The private training set's size.
pub const EXAMPLES: usize = 2000;

/// Trains candidate `c` with the privacy the search handed it in its folder of `journal`
/// (continued from its checkpoint when it has one; stopped after a step by `interrupt`) and
/// counts its correct predictions on the held-out examples.
pub fn candidate(c: Candidate<'_, Config>, journal: &Journal, interrupt: &'static AtomicBool) -> Result<Trained<f64>> {
    let device = dp_engine::backend::cpu().device;
    let (train, held_out) = (table(EXAMPLES, 0)?, table(500, 2500)?);
    let dir = journal.dir().join(c.name);
    let folder = if checkpoint_path(&dir).exists() { RunFolder::resume(&dir)? } else { RunFolder::fresh(&dir, None)? };
    let options = RunOptions {
        interrupt: Some(interrupt),
        keep_key: true,
        overwrite: !folder.is_resumed(),
        ..RunOptions::default()
    };
    let model = LogReg::new(&device);
    let (model, report) =
        Run::new(folder, c.privacy.clone(), c.config.0, |m: &LogReg| image_accuracy(m, &held_out, &device))
            .with_options(options)
            .quiet() // the search says what it tries
            .train_model(model, SgdConfig::new().init(), &CrossEntropyLots { data: &train }, &device)?;
    if report.interrupted {
        return Err(EngineError::Interrupted("run the same command again to continue the search".into()));
    }
    let test_accuracy = image_accuracy(&model, &table(500, 3000)?, &device)?;
    let correct = (report.test_accuracy * 500.0).round() as usize;
    Ok(Trained { value: test_accuracy, run: report, correct, evaluated: 500 })
}

fn main() -> std::process::ExitCode {
    let interrupt = dp_run::interrupt::install();
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: accounted_search SEARCH_DIR");
        return std::process::ExitCode::from(2);
    };
    let grid: Vec<Config> = [0.1, 0.5, 2.0].into_iter().flat_map(|lr| [(lr, 50), (lr, 100)]).collect();
    let settings = SearchSettings {
        repetitions: Repetitions::TruncatedNegativeBinomial { shape: 1.0, mean: 3.0 },
        target_epsilon: 2.0,
        delta: 1e-5,
        score: Score::Private { noise_multiplier: 10.0, held_out: 500 },
        seed: None,
    };
    let state = Path::new(&dir).join("search-state");
    let opened = match std::fs::create_dir_all(&dir) {
        Err(e) => Err(EngineError::invalid("search dir", e.to_string())),
        Ok(()) if state.exists() => Journal::open(&state),
        Ok(()) => Journal::create(&state),
    };
    let result = opened.and_then(|journal| {
        Ok((search(&grid, privacy, EXAMPLES, &settings, &journal, |c| candidate(c, &journal, interrupt))?, journal))
    });
    match result {
        Ok((searched, journal)) => {
            match searched.chosen {
                Some(((lr, lot), test_accuracy, score)) => println!(
                    "chosen: learning rate {lr}, lot {lot}; noisy held-out score {:.2}%, test accuracy {:.2}%; the search spent {}",
                    score * 100.0,
                    test_accuracy * 100.0,
                    searched.privacy
                ),
                None => println!("no candidate drawn; the search spent {}", searched.privacy),
            }
            // Released: K and the other candidates go with the journal.
            match journal.remove() {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
