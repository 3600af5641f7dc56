//! `dptrain tune`: a hyper-parameter search whose privacy is accounted (`dp_run::search`) over
//! a space file (`search_space`). Candidates train as `dptrain train` runs in the search's
//! private folder (its journal: owner-only, beside nothing a reader may see: K, the other
//! candidates' models and scores are the mechanism's internal state), score on the held-out end
//! of the training set (`validation`, private: a noisy count) and only the best is released:
//! its configuration, its noisy score, its model (`chosen/`) and the search's epsilon. An
//! interrupted search continues with `--resume`: the candidate it stopped in resumes from its
//! checkpoint, and no finished candidate trains again.

use crate::search_folder::{CHOSEN_DIR, STATE_DIR, refuse_run};
use crate::search_space::{Range, Space};
use crate::train_config::TrainConfig;
use crate::trainer::{DataView, Datasets, Session, Told, features, load_images, train_then_test};
use dp_accounting::PrivacyReport;
use dp_accounting::repeat_and_select::Repetitions;
use dp_data::ImageDataset;
use dp_data::safe_files::{PUBLIC, file_error, occupied, remove_entry, remove_if_present, write_atomic};
use dp_engine::backend::SelectedDevice;
use dp_engine::error::{EngineError, Result};
use dp_run::folder::checkpoint::checkpoint_path;
use dp_run::folder::keys::KEY_FILE;
use dp_run::folder::lock::RunLock;
use dp_run::folder::{CONFIG_FILE, METRICS_FILE, MODEL_FILE, PLOT_FILE, PLOT_PNG, REPORT_FILE};
use dp_run::owner_key::OwnerKey;
use dp_run::provenance::Provenance;
use dp_run::search::{Candidate, Journal, Score, SearchSettings, Trained, search};
use dp_run::{RunOptions, RunReport};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// What `dptrain tune` releases (report.json of the search's folder).
#[derive(Debug, Clone, Serialize)]
pub struct TuneReport {
    /// The chosen configuration (None: Poisson drew no candidate).
    pub chosen: Option<TrainConfig>,
    /// Its released score: the noisy accuracy on the private held-out examples.
    pub validation_score: Option<f64>,
    /// The chosen model's accuracy on the test set (post-processing of the release).
    pub test_accuracy: Option<f64>,
    /// The whole search's privacy.
    #[serde(flatten)]
    pub privacy: PrivacyReport,
    /// The chosen candidate's run folder.
    pub run_dir: Option<PathBuf>,
    /// Where the chosen model's initial weights came from (their digest, and their report where
    /// it verifies): what the search's epsilon does not count.
    pub initial_weights: Option<Provenance>,
    /// The chosen candidate's run's caveats.
    pub notes: Vec<String>,
}

/// How a search runs.
#[derive(Debug, Clone)]
pub struct Tune {
    /// The space searched.
    pub space: Space,
    /// How the number of candidates is drawn.
    pub repetitions: Repetitions,
    /// The whole search's epsilon.
    pub target_epsilon: f64,
    /// Its delta.
    pub delta: f64,
    /// The standard deviation of the noise on each candidate's count of correct held-out
    /// predictions.
    pub score_noise: f64,
    /// The seed of a reproducible search.
    pub seed: Option<u64>,
    /// The search's output folder.
    pub out_dir: PathBuf,
    /// Replace another search's state in `out_dir`.
    pub overwrite: bool,
    /// Continue the interrupted search in `out_dir`.
    pub resume: bool,
    /// Keep the journal (K, every candidate's model, score and keys) when the search completes.
    pub keep_state: bool,
    /// Raised (by a signal handler) to stop the search after the current step.
    pub interrupt: Option<&'static AtomicBool>,
}

/// A configuration of the space as the search sees it: a cell with the ranges drawn in it and
/// the digest of the training data every candidate trains on (all in the journal's
/// fingerprint, so a resumed search refuses another space or other data).
#[derive(Debug, Clone, Serialize)]
struct Cell<'a> {
    config: &'a TrainConfig,
    ranges: &'a [(String, Range)],
    data: &'a str,
}

/// The data every candidate reads, loaded (and a ScatterNet model's features computed) once
/// before the search: nothing a candidate does depends on how many came before it (K is
/// secret), and no candidate reads data other than the first did.
struct SharedData {
    images: Datasets,
    features: Option<Datasets>,
}

impl SharedData {
    /// The sets of the cells of `space`, with the test set beside the held-out examples.
    fn load(space: &Space, t: &Tune, observe: &mut dyn FnMut(Told<'_>)) -> Result<Self> {
        let first = &space.cells[0];
        let images = load_images(first, true)?;
        let features = match space.cells.iter().any(|c| c.model.reads_scattering()) {
            true => Some(features(&images, space.cells.iter().any(|c| c.augmult.is_none()), t.interrupt, observe)?),
            false => None,
        };
        Ok(Self { images, features })
    }

    /// Digest of every example the candidates read: the training examples, the held-out ones
    /// they are scored on and the test set beside them (a resumed search refuses other data).
    fn digest(&self) -> String {
        let Datasets { train, test, beside } = &self.images;
        let parts =
            [Some(train), Some(test), beside.as_ref()].map(|set| set.map_or(String::new(), ImageDataset::digest));
        parts.join(":")
    }

    /// What a candidate of `config` reads: images, or a ScatterNet model's features (its
    /// training images as they are when it draws augmented views).
    fn view(&self, config: &TrainConfig) -> DataView<'_> {
        match (&self.features, config.model.reads_scattering()) {
            (Some(f), true) => DataView {
                train: if config.augmult.is_some() { &self.images.train } else { &f.train },
                test: &f.test,
                beside: f.beside.as_ref(),
            },
            _ => self.images.view(),
        }
    }
}

/// What a finished candidate leaves in the journal: its folder's name, its configuration (its
/// ranges' values drawn) and its model's test accuracy.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Outcome {
    name: String,
    config: TrainConfig,
    test_accuracy: f64,
    initial_weights: Option<Provenance>,
    notes: Vec<String>,
}

/// Runs (or, resuming, continues) the search, telling `observe` of each candidate's run (its
/// folder is private: what is told is shown on this terminal only).
pub fn tune(t: &Tune, device: &SelectedDevice, observe: &mut dyn FnMut(Told<'_>)) -> Result<TuneReport> {
    let held_out = shared_held_out(&t.space)?;
    // The key the chosen model is sealed with, checked before anything is spent.
    OwnerKey::for_folder(&t.out_dir)?;
    // One search per folder at a time: two would spend the data's privacy twice.
    let _lock = RunLock::acquire(&t.out_dir)?;
    let journal = prepare(&t.out_dir, t.overwrite, t.resume)?;
    let data = SharedData::load(&t.space, t, observe)?;
    let n = data.images.train.len();
    // A range that would move a candidate's lot size, steps or held-out examples is refused.
    t.space.shapes(n)?;
    let digest = data.digest();
    let cells: Vec<Cell<'_>> =
        t.space.cells.iter().map(|config| Cell { config, ranges: &t.space.ranges, data: &digest }).collect();
    let settings = SearchSettings {
        repetitions: t.repetitions,
        target_epsilon: t.target_epsilon,
        delta: t.delta,
        score: Score::Private { noise_multiplier: t.score_noise, held_out },
        seed: t.seed,
    };
    let searched = search(
        &cells,
        |cell| cell.config.privacy(),
        n,
        &settings,
        &journal,
        |c| {
            let (outcome, run) = candidate(t, &c, &data, &journal, device, observe)?;
            let correct = (run.test_accuracy * held_out as f64).round() as usize;
            Ok(Trained { value: outcome, run, correct, evaluated: held_out })
        },
    )?;
    finish(t, searched.chosen.map(|(_, outcome, score)| (outcome, score)), searched.privacy, journal)
}

/// The held-out examples every cell of `space` is scored on, refused unless they all read the
/// same data (dataset, folder, how own data is read) and hold out the same examples: one search
/// is over one private dataset, and its candidates are scored alike.
fn shared_held_out(space: &Space) -> Result<usize> {
    let first = space.cells.first().ok_or_else(|| EngineError::invalid("search space", "holds no candidate"))?;
    let held_out = first.validation.ok_or_else(|| {
        EngineError::invalid(
            "search space",
            "give `validation` (held-out training examples) in [base]: candidates are scored on it",
        )
    })?;
    let same_data = |c: &TrainConfig| {
        c.validation == Some(held_out)
            && c.dataset == first.dataset
            && c.data_dir == first.data_dir
            && c.own_data() == first.own_data()
    };
    if !space.cells.iter().all(same_data) {
        return Err(EngineError::invalid(
            "search space",
            "every candidate must share the dataset, `data_dir`, how own data is read and `validation`: a search is over one private dataset",
        ));
    }
    Ok(held_out)
}

/// Trains (or continues) candidate `c` on the search's `data` in its folder of the journal: a
/// run with a checkpoint resumes (a finished one is only evaluated again), any other starts
/// afresh (it took no step); gives its outcome and its run's report (whose accuracy is on the
/// held-out examples).
fn candidate(
    t: &Tune,
    c: &Candidate<'_, Cell<'_>>,
    data: &SharedData,
    journal: &Journal,
    device: &SelectedDevice,
    observe: &mut dyn FnMut(Told<'_>),
) -> Result<(Outcome, RunReport)> {
    let config = t.space.candidate(c.config.config, c.draw)?;
    let dir = journal.dir().join(c.name);
    let resume = occupied(&checkpoint_path(&dir));
    let run = TrainConfig {
        noise_multiplier: Some(c.noise_multiplier),
        target_epsilon: None,
        out_dir: dir,
        seed: t.seed.map(|_| c.draw),
        ..config.clone()
    };
    // The key stays until the search ends (a finished candidate may be evaluated again on
    // resume); the whole journal goes then, and the chosen folder never keeps it.
    let options = RunOptions { interrupt: t.interrupt, keep_key: true, overwrite: !resume, ..RunOptions::default() };
    let (report, test_accuracy) =
        train_then_test(run, Session { resume, options }, data.view(&config), device, observe)?;
    if report.interrupted {
        return Err(EngineError::Interrupted(format!(
            "the search is interrupted; continue it with `dptrain tune --resume` and the same --space and settings (--out-dir {}): starting it again would spend the data's privacy twice",
            t.out_dir.display()
        )));
    }
    let outcome = Outcome {
        name: c.name.to_string(),
        config,
        test_accuracy,
        initial_weights: report.initial_weights.clone(),
        notes: report.notes.clone(),
    };
    Ok((outcome, report))
}

/// The journal of the search in `out_dir`: the interrupted one's when `resume`, else a new one,
/// refused while the folder holds a training run, or another search (its candidates spent
/// privacy: running again would spend it twice) unless `overwrite`. A search refused before it
/// drew its plan left a journal that spent nothing: it is replaced.
fn prepare(out_dir: &Path, overwrite: bool, resume: bool) -> Result<Journal> {
    refuse_run(out_dir)?;
    let state = out_dir.join(STATE_DIR);
    let report = out_dir.join(REPORT_FILE);
    if resume {
        if !occupied(&state) {
            let why = match occupied(&report) {
                true => "holds a complete search: nothing is left to resume",
                false => "holds no search to resume",
            };
            return Err(file_error(out_dir, why).into());
        }
        return Journal::open(&state);
    }
    let unused = !occupied(&report) && Journal::open(&state).and_then(|j| j.spent_nothing()).unwrap_or(false);
    if occupied(&state) || occupied(&report) {
        if !overwrite && !unused {
            return Err(EngineError::invalid(
                "out dir",
                format!(
                    "{} holds another search: give --resume to continue an interrupted one (running it again would spend the data's privacy twice), --overwrite to replace it, or another --out-dir",
                    out_dir.display()
                ),
            ));
        }
        remove_entry(&state)?;
        remove_if_present(&report)?;
    }
    Journal::create(&state)
}

/// Releases the chosen candidate: its run folder moved to `chosen/` with its model only, the
/// report written, the journal removed unless kept. Each part may run again (a search killed
/// here resumes to finish).
fn finish(t: &Tune, chosen: Option<(Outcome, f64)>, privacy: PrivacyReport, journal: Journal) -> Result<TuneReport> {
    let mut report = TuneReport {
        chosen: None,
        validation_score: None,
        test_accuracy: None,
        privacy,
        run_dir: None,
        initial_weights: None,
        notes: Vec::new(),
    };
    if let Some((outcome, score)) = chosen {
        let from = journal.dir().join(&outcome.name);
        let to = t.out_dir.join(CHOSEN_DIR);
        if from.is_dir() {
            remove_entry(&to)?;
            std::fs::rename(&from, &to).map_err(|e| file_error(&to, e))?;
        }
        // Only the model is released: the run's own report, metrics, curves and model file hold
        // its exact held-out accuracy and its own (smaller) epsilon, its settings its folder's
        // name, and its key file the keys of its noise.
        for file in [CONFIG_FILE, METRICS_FILE, REPORT_FILE, PLOT_FILE, PLOT_PNG, MODEL_FILE, KEY_FILE] {
            remove_if_present(&to.join(file))?;
        }
        (report.initial_weights, report.notes) = (outcome.initial_weights, outcome.notes);
        report.chosen = Some(TrainConfig { seed: None, ..outcome.config });
        report.validation_score = Some(score);
        (report.test_accuracy, report.run_dir) = (Some(outcome.test_accuracy), Some(to));
    }
    let json = serde_json::to_vec_pretty(&report).map_err(|e| EngineError::invalid("report", e.to_string()))?;
    write_atomic(&t.out_dir.join(REPORT_FILE), &json, PUBLIC)?;
    if !t.keep_state {
        journal.remove()?;
    }
    Ok(report)
}

/// Whether `repetitions` parses: `geometric`, `logarithmic`, `tnb:ETA` or `poisson`, with `mean`.
pub fn repetitions(distribution: &str, mean: f64) -> Result<Repetitions> {
    let r = match distribution {
        "geometric" => Repetitions::TruncatedNegativeBinomial { shape: 1.0, mean },
        "logarithmic" => Repetitions::TruncatedNegativeBinomial { shape: 0.0, mean },
        "poisson" => Repetitions::Poisson { mean },
        other => match other.strip_prefix("tnb:").and_then(|eta| eta.parse::<f64>().ok()) {
            Some(shape) => Repetitions::TruncatedNegativeBinomial { shape, mean },
            None => {
                return Err(EngineError::invalid(
                    "candidates distribution",
                    format!("`{other}`: give geometric, logarithmic, tnb:ETA or poisson"),
                ));
            }
        },
    };
    Ok(r.validate()?)
}
