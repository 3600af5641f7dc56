//! `dptrain tune`: a hyper-parameter search whose privacy is accounted (`dp_run::search`). The
//! space is a TOML file: `[base]` holds `dptrain train` settings (as `--config` does) and
//! `[space]` a list of values for any of them; every combination is a configuration, and each
//! candidate is one of them drawn at random. Candidates train as `dptrain train` runs in the
//! search's private folder (owner-only, beside nothing a reader may see: K, the other
//! candidates' models and scores are the mechanism's internal state), score on the held-out end
//! of the training set (`validation`, private: a noisy count) and only the best is released:
//! its configuration, its noisy score, its run folder (`chosen/`) and the search's epsilon.

use crate::fetch::data_folder;
use crate::train_config::TrainConfig;
use crate::trainer::{Session, Told, train_then_test};
use dp_accounting::PrivacyReport;
use dp_accounting::repeat_and_select::Repetitions;
use dp_accounting::search::TrainingShape;
use dp_data::SecretKey;
use dp_data::Split;
use dp_data::safe_files::{PUBLIC, file_error, occupied, remove_if_present, write_atomic};
use dp_engine::backend::SelectedDevice;
use dp_engine::error::{EngineError, Result};
use dp_run::RunOptions;
use dp_run::folder::lock::RunLock;
use dp_run::folder::{CONFIG_FILE, METRICS_FILE, PLOT_FILE, PLOT_PNG, REPORT_FILE};
use dp_run::search::{Score, SearchSettings, Trained, search};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// The most configurations a space may hold.
pub const MAX_CONFIGURATIONS: usize = 10_000;

/// The search's private folder inside its output folder.
pub const STATE_DIR: &str = "search-state";

/// A search space as its TOML file holds it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpaceFile {
    /// Settings every candidate shares.
    #[serde(default)]
    pub base: toml::Table,
    /// For each setting searched, the values it takes.
    pub space: toml::Table,
}

/// Every configuration of `file`: the base settings with one value of each searched setting.
pub fn configurations(file: &SpaceFile) -> Result<Vec<TrainConfig>> {
    let mut tables = vec![file.base.clone()];
    for (key, values) in &file.space {
        let values = values.as_array().filter(|v| !v.is_empty()).ok_or_else(|| {
            EngineError::invalid("search space", format!("`{key}` must be a non-empty list of values"))
        })?;
        if tables.len().saturating_mul(values.len()) > MAX_CONFIGURATIONS {
            return Err(EngineError::invalid("search space", format!("more than {MAX_CONFIGURATIONS} configurations")));
        }
        tables = tables
            .iter()
            .flat_map(|t| values.iter().map(move |v| (t.clone(), v.clone())))
            .map(|(mut t, v)| {
                t.insert(key.clone(), v);
                t
            })
            .collect();
    }
    tables
        .into_iter()
        .map(|t| {
            let config = TrainConfig::deserialize(t)
                .map_err(|e| EngineError::invalid("search space", e.message().to_string()))?;
            config.privacy()?;
            Ok(config)
        })
        .collect()
}

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
}

/// How a search runs.
#[derive(Debug, Clone)]
pub struct Tune {
    /// The configurations.
    pub configs: Vec<TrainConfig>,
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
    /// Raised (by a signal handler) to stop the search after the current step.
    pub interrupt: Option<&'static AtomicBool>,
}

/// Runs the search, telling `observe` of each candidate's run (its folder is private: what is
/// told is shown on this terminal only).
pub fn tune(t: &Tune, device: &SelectedDevice, observe: &mut dyn FnMut(Told<'_>)) -> Result<TuneReport> {
    // One search per folder at a time: two would spend the data's privacy twice.
    let _lock = RunLock::acquire(&t.out_dir)?;
    let state = prepare(&t.out_dir, t.overwrite)?;
    let first = t.configs.first().ok_or_else(|| EngineError::invalid("search space", "holds no candidate"))?;
    let held_out = first.validation.ok_or_else(|| {
        EngineError::invalid(
            "search space",
            "give `validation` (held-out training examples) in [base]: candidates are scored on it",
        )
    })?;
    if t.configs.iter().any(|c| c.validation != Some(held_out) || c.dataset != first.dataset) {
        return Err(EngineError::invalid("search space", "every candidate must share the dataset and `validation`"));
    }
    let n = first
        .dataset
        .load(&data_folder(first.dataset, first.data_dir.as_deref())?, Split::Train)?
        .len()
        .saturating_sub(held_out);
    let shapes = t.configs.iter().map(|c| shape(c, n)).collect::<Result<Vec<_>>>()?;
    let mut index = 0usize;
    let settings = SearchSettings {
        repetitions: t.repetitions,
        target_epsilon: t.target_epsilon,
        delta: t.delta,
        score: Score::Private { noise_multiplier: t.score_noise, held_out },
        seed: t.seed,
    };
    let searched = search(
        &(0..t.configs.len()).collect::<Vec<_>>(),
        |&i| shapes[i],
        &settings,
        |&i, z| {
            index += 1;
            // A name from the OS, not the candidate's rank: the released model's files must not
            // say how many candidates came before it.
            let name = format!("candidate-{}", hex::encode(&SecretKey::from_os().as_bytes()[..8]));
            let config = candidate(&t.configs[i], z, &state.join(name), t.seed.map(|s| s ^ index as u64));
            let options = RunOptions { interrupt: t.interrupt, ..RunOptions::default() };
            let session = Session { resume: false, options };
            let (report, test_accuracy) = train_then_test(config, session, device, observe)?;
            if report.interrupted {
                return Err(EngineError::Interrupted(format!(
                    "the search: the candidates so far spent part of its budget and {} keeps them; it cannot be resumed (give --overwrite to start again)",
                    t.out_dir.display()
                )));
            }
            let correct = (report.test_accuracy * held_out as f64).round() as usize;
            Ok(Trained { value: (report.run_dir, test_accuracy), correct, evaluated: held_out })
        },
    )?;
    finish(t, searched.chosen, searched.privacy, &state)
}

/// The training shape of `config` on `n` examples.
fn shape(config: &TrainConfig, n: usize) -> Result<TrainingShape> {
    let settings = config.privacy()?.settings;
    Ok(TrainingShape { sample_rate: settings.lot_size as f64 / n.max(1) as f64, steps: settings.planned_steps(n)? })
}

/// `config` as one candidate: at noise multiplier `z`, in `dir`, with `seed`.
fn candidate(config: &TrainConfig, z: f64, dir: &Path, seed: Option<u64>) -> TrainConfig {
    TrainConfig { noise_multiplier: Some(z), target_epsilon: None, out_dir: dir.to_path_buf(), seed, ..config.clone() }
}

/// The search's private folder in `out_dir`, refused while it holds an interrupted search
/// (its candidates spent privacy: running again would spend it twice) unless `overwrite`.
fn prepare(out_dir: &Path, overwrite: bool) -> Result<PathBuf> {
    let state = out_dir.join(STATE_DIR);
    if occupied(&state) || occupied(&out_dir.join("report.json")) {
        if !overwrite {
            return Err(EngineError::invalid(
                "out dir",
                format!(
                    "{} holds another search (an interrupted one has spent part of its budget: resuming is not supported, and running it again spends the data's privacy twice); give --overwrite to replace it, or another --out-dir",
                    out_dir.display()
                ),
            ));
        }
        std::fs::remove_dir_all(&state)
            .or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(e) })
            .map_err(|e| file_error(&state, e))?;
        remove_if_present(&out_dir.join("report.json"))?;
    }
    // Created here, never an existing folder or a link planted in its place.
    std::fs::create_dir(&state).map_err(|e| file_error(&state, e))?;
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).map_err(|e| file_error(&state, e))?;
    Ok(state)
}

/// Releases the chosen candidate: its run folder moved to `chosen/`, the report written, the
/// private folder removed.
fn finish(
    t: &Tune,
    chosen: Option<(usize, (PathBuf, f64), f64)>,
    privacy: PrivacyReport,
    state: &Path,
) -> Result<TuneReport> {
    let mut report = TuneReport { chosen: None, validation_score: None, test_accuracy: None, privacy, run_dir: None };
    if let Some((i, (dir, test_accuracy), score)) = chosen {
        let to = t.out_dir.join("chosen");
        if to.exists() {
            std::fs::remove_dir_all(&to).map_err(|e| file_error(&to, e))?;
        }
        std::fs::rename(&dir, &to).map_err(|e| file_error(&to, e))?;
        // Only the model is released: the run's own report, metrics and curves hold its exact
        // held-out accuracy and its own (smaller) epsilon, and its settings its folder's name.
        for file in [CONFIG_FILE, METRICS_FILE, REPORT_FILE, PLOT_FILE, PLOT_PNG] {
            remove_if_present(&to.join(file))?;
        }
        report.chosen = Some(TrainConfig { seed: None, ..t.configs[i].clone() });
        (report.validation_score, report.test_accuracy, report.run_dir) = (Some(score), Some(test_accuracy), Some(to));
    }
    std::fs::remove_dir_all(state).map_err(|e| file_error(state, e))?;
    let json = serde_json::to_vec_pretty(&report).map_err(|e| EngineError::invalid("report", e.to_string()))?;
    write_atomic(&t.out_dir.join("report.json"), &json, PUBLIC)?;
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
