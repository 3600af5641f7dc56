//! `dptrain train`: a zoo model on an image dataset, trained by the DP step (or, for the
//! baseline, by plain Burn training) with a burn-optim optimiser, the privacy ledger recorded by
//! the step itself, evaluation, metrics, checkpoints and resume. The run is set up in named
//! pieces: [`crate::plan`] (steps, noise multiplier, budget check), the run folder, a fresh start
//! (with the library's dry run) or [`resume`] (every privacy-relevant field of the checkpoint
//! checked against the run), canary placement; then the loop steps the library's
//! [`DpOptimizer`], as a library user would.

use crate::allocation::StepNoise;
use crate::backend::SelectedDevice;
use crate::canaries::{AuditRequest, RunAudit, WhiteBoxCanaries};
use crate::checkpoint::{Checkpoint, Header, checkpoint_path, sha256_hex, values_digest, write_atomic};
use crate::classifier::{CrossEntropyLots, evaluate};
use crate::dp_optimizer::{DpOptimizer, StartFrom};
use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use crate::mechanism::{self, Mechanism};
use crate::noise::GaussianNoise;
use crate::optimizer::optimizer;
use crate::plan::{Plan, fresh_sampler, lot_sampling, plan};
use crate::privacy::PrivacySpent;
use crate::privacy_engine::dry_run;
use crate::step::StepState;
use crate::step::batching::Batching;
use crate::step::private::mean_gradient;
use crate::tensor_io::{to_host, vector};
use crate::train_config::{MechanismName, SamplingName, TrainConfig};
use crate::zoo::{ModelSpec, ZooModel, build};
use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::store::ModuleRecord;
use burn::tensor::{Bytes, Device};
use dp_accounting::Guarantee;
use dp_data::{ChaChaState, DatasetName, ImageDataset, Sampling, Split};
use serde::Serialize;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// The ChaCha20 stream reserved for parameter initialisation.
const INIT_STREAM: u64 = 2;

/// What the trainer tells its observer.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The run is set up.
    Started {
        /// Backend and adapter.
        device: String,
        /// Scalar parameters of the model.
        parameters: usize,
        /// Training examples.
        train_examples: usize,
        /// Sampling rate q.
        sample_rate: f64,
        /// Noise multiplier z (None for the baseline).
        noise_multiplier: Option<f64>,
        /// Steps planned.
        planned_steps: u64,
        /// Step the run starts from (non-zero when resumed).
        start_step: u64,
        /// Privacy the whole planned run will have spent.
        planned_privacy: PrivacySpent,
        /// optimized-paper: the epsilon of the smallest sigma it will use (label none).
        planned_sigma_privacy: Option<PrivacySpent>,
        /// Caveats the user must read.
        notes: Vec<String>,
    },
    /// Training metrics of recent lots (on the private training data: not DP).
    Step {
        /// Steps done.
        step: u64,
        /// Mean training loss of the last lot.
        loss: f64,
        /// Training accuracy of the last lot.
        accuracy: Option<f64>,
    },
    /// Evaluation at an epoch boundary or at the end.
    Evaluated {
        /// Steps done.
        step: u64,
        /// Test accuracy.
        test_accuracy: f64,
        /// Privacy spent so far.
        privacy: PrivacySpent,
    },
}

/// The final report of a run (also written to report.json).
#[derive(Debug, Clone, Serialize)]
pub struct TrainReport {
    /// Test accuracy of the final model.
    pub test_accuracy: f64,
    /// Epsilon spent (None for the baseline).
    pub epsilon: Option<f64>,
    /// Delta.
    pub delta: f64,
    /// Accountant.
    pub accountant: String,
    /// Guarantee label of epsilon.
    pub guarantee: Guarantee,
    /// optimized-paper: the epsilon of the Gaussian mechanism with the smallest sigma used
    /// (label none: w came from the private data).
    pub sigma_privacy: Option<PrivacySpent>,
    /// Steps taken.
    pub steps: u64,
    /// Wall-clock training seconds (over all resumed segments).
    pub seconds: f64,
    /// Noise multiplier used.
    pub noise_multiplier: Option<f64>,
    /// Sampling rate q.
    pub sample_rate: f64,
    /// Device.
    pub device: String,
    /// Model.
    pub model: String,
    /// Mechanism.
    pub mechanism: MechanismName,
    /// True when the run was seeded (reproducible).
    pub seeded: bool,
    /// Caveats.
    pub notes: Vec<String>,
    /// The run folder.
    pub run_dir: PathBuf,
    /// False when this session stopped before the planned steps (resume to continue).
    pub completed: bool,
    /// True when an interruption (Ctrl-C, SIGTERM) stopped this session early.
    pub interrupted: bool,
    /// The one-run audit, when one was asked for.
    pub audit: Option<RunAudit>,
}

/// Loads a named dataset split from `dir` (or its standard location).
pub fn load_dataset(name: DatasetName, dir: Option<&Path>, split: Split) -> Result<ImageDataset> {
    let dir = match dir.map(Path::to_path_buf).or_else(|| name.default_dir()) {
        Some(d) => d,
        None => {
            return Err(EngineError::invalid(
                "data dir",
                format!("{name:?} has no standard location: give --data-dir"),
            ));
        }
    };
    name.load(&dir, split).map_err(|e| EngineError::Data(e.to_string()))
}

/// The training and test sets of a run, refused when their shapes or classes differ (the
/// model could not evaluate the test set after training).
fn load_data(config: &TrainConfig) -> Result<(ImageDataset, ImageDataset)> {
    let train = load_dataset(config.dataset, config.data_dir.as_deref(), Split::Train)?;
    let test = load_dataset(config.dataset, config.data_dir.as_deref(), Split::Test)?;
    if train.shape() != test.shape() || train.classes() != test.classes() {
        return Err(EngineError::Data(format!(
            "the test set's examples are {:?} in {} classes, the training set's {:?} in {}",
            test.shape(),
            test.classes(),
            train.shape(),
            train.classes()
        )));
    }
    Ok((train, test))
}

/// How this invocation runs: fresh or resumed, and whether it stops early.
#[derive(Debug, Clone, Copy, Default)]
pub struct Session {
    /// Continue the run in the config's run folder from its checkpoint.
    pub resume: bool,
    /// Take at most this many steps now, then checkpoint and return (resume later).
    pub stop_after: Option<u64>,
    /// Audit the run with white-box canaries (a whole run in one session only).
    pub audit: Option<AuditRequest>,
    /// Start a fresh run in a folder that holds another run's files, replacing them.
    pub overwrite: bool,
    /// Raised (by a signal handler) to stop after the current step with a checkpoint.
    pub interrupt: Option<&'static AtomicBool>,
}

/// The files a run writes into its folder.
const RUN_FILES: [&str; 4] = ["checkpoint.bin", "config.toml", "metrics.jsonl", "report.json"];

/// Prepares the folder of a fresh run: refused when it holds another run's files, unless
/// `overwrite` (then they are removed first); writes config.toml (the settings, with the noise
/// multiplier `z` they resolve to in a comment) and returns its digest.
fn start_run_folder(run_dir: &Path, config: &TrainConfig, z: Option<f64>, overwrite: bool) -> Result<String> {
    let io = |e: std::io::Error| EngineError::Checkpoint { path: run_dir.to_path_buf(), reason: e.to_string() };
    let occupied: Vec<&str> = RUN_FILES.into_iter().filter(|f| run_dir.join(f).exists()).collect();
    if !occupied.is_empty() {
        if !overwrite {
            return Err(EngineError::invalid(
                "out dir",
                format!(
                    "{} holds another run ({}): give --resume to continue it, --overwrite to replace it, or another --out-dir",
                    run_dir.display(),
                    occupied.join(", ")
                ),
            ));
        }
        for f in occupied {
            fs::remove_file(run_dir.join(f)).map_err(io)?;
        }
    }
    fs::create_dir_all(run_dir).map_err(io)?;
    let settings = toml::to_string(config).map_err(|e| EngineError::invalid("config", e.to_string()))?;
    let z = z.map_or("none (no noise)".to_string(), |z| z.to_string());
    let toml = format!("# The settings of this run; its noise multiplier resolves to {z}.\n{settings}");
    write_atomic(&run_dir.join("config.toml"), toml.as_bytes())?;
    Ok(sha256_hex(toml.as_bytes()))
}

/// A run continued from its checkpoint.
struct Restored {
    model: ZooModel,
    optimizer: ModuleOptimizer,
    state: StepState,
    step: u64,
    seconds: f64,
}

/// Loads the checkpoint of the run in `run_dir` and the run's configuration (its config.toml),
/// refused unless that config.toml is the one the checkpoint belongs to: the configuration
/// decides every other check.
fn load_checkpoint(run_dir: &Path) -> Result<(Checkpoint, TrainConfig)> {
    let path = checkpoint_path(run_dir);
    let ckpt = Checkpoint::load(&path)?;
    let toml = run_dir.join("config.toml");
    let bytes = fs::read(&toml).map_err(|e| EngineError::Checkpoint { path: toml.clone(), reason: e.to_string() })?;
    if sha256_hex(&bytes) != ckpt.header.config_digest {
        return Err(EngineError::Checkpoint {
            path,
            reason: "the run folder's config.toml is not the one this checkpoint belongs to".into(),
        });
    }
    let config = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| toml::from_str(text).ok())
        .ok_or_else(|| EngineError::Checkpoint { path: toml, reason: "not a run configuration".into() })?;
    Ok((ckpt, config))
}

/// Restores a run from `ckpt` after checking everything its privacy claim depends on against
/// the run itself: the step counts, every ledger entry's noise
/// multiplier, rate and sampling, the sampler's N and rate, the noise stream's position, and
/// that the records fit the model. A checkpoint failing any check is refused in one line.
fn resume(
    ckpt: Checkpoint,
    config: &TrainConfig,
    plan: &Plan,
    mechanism: &dyn Mechanism,
    fresh: (ZooModel, ModuleOptimizer),
    path: &Path,
    device: &Device,
) -> Result<Restored> {
    let refuse = |reason: String| EngineError::Checkpoint { path: path.to_path_buf(), reason };
    let h = ckpt.header;
    if h.planned_steps != plan.planned_steps || h.step > plan.planned_steps {
        return Err(refuse(format!(
            "step {} of {} planned; the run plans {}",
            h.step, h.planned_steps, plan.planned_steps
        )));
    }
    let recorded = if mechanism.is_private() { h.step } else { 0 };
    if h.ledger.total_steps() != recorded {
        return Err(refuse(format!("its ledger holds {} steps, the run took {}", h.ledger.total_steps(), recorded)));
    }
    let want_z = plan.z.and_then(|z| mechanism.ledger_multiplier(z));
    for e in h.ledger.entries() {
        let z_ok = want_z.is_none_or(|z| e.noise_multiplier == z);
        if !z_ok || e.sample_rate != plan.sample_rate || e.sampling != lot_sampling(config) {
            return Err(refuse(format!(
                "a ledger entry (z {}, q {}, {:?}) is not this run's (z {:?}, q {}, {:?})",
                e.noise_multiplier,
                e.sample_rate,
                e.sampling,
                want_z,
                plan.sample_rate,
                lot_sampling(config)
            )));
        }
    }
    let sampling_ok = match h.sampler.sampling() {
        Sampling::Poisson { rate } => config.sampling == SamplingName::Poisson && rate == plan.sample_rate,
        Sampling::Shuffled { lot_size } => config.sampling == SamplingName::Shuffled && lot_size == config.lot_size,
    };
    if !sampling_ok || h.sampler.population() != plan.n {
        return Err(refuse(format!(
            "its sampler draws {:?} from {} examples; the run draws q = {} from {}",
            h.sampler.sampling(),
            h.sampler.population(),
            plan.sample_rate,
            plan.n
        )));
    }
    let (model, optimizer) = fresh;
    let sizes: Vec<usize> = ParamTable::of(&model)?.params().iter().map(|p| p.len()).collect();
    let noise = match (mechanism.is_private(), h.noise) {
        (true, Some(state)) => Some(GaussianNoise::resumed(state, config.seed, h.step, &sizes)?.state().clone()),
        (false, None) => None,
        _ => return Err(refuse("its noise stream does not fit the mechanism".into())),
    };
    let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(ckpt.model))
        .map_err(|e| refuse(format!("model record: {e:?}")))?;
    // The record brings back the parameters' ids, which the optimiser's record is keyed by.
    let model =
        model.try_load_record(record).map_err(|e| refuse(format!("the model record does not fit the model: {e:?}")))?;
    let optimizer = optimizer
        .from_bytes(Bytes::from_bytes_vec(ckpt.optimizer))
        .map_err(|e| refuse(format!("optimizer record: {e:?}")))?;
    let released = match ckpt.released {
        Some(parts) if parts.iter().map(Vec::len).eq(sizes.iter().copied()) => {
            Some(parts.into_iter().map(|p| vector(p, device)).collect())
        }
        Some(_) => return Err(refuse("its released gradients do not fit the model".into())),
        None => None,
    };
    let state = StepState { sampler: h.sampler, noise, ledger: h.ledger, released };
    Ok(Restored { model: model.train(), optimizer, state, step: h.step, seconds: h.seconds })
}

/// Canaries for a one-run audit of a run of `plan` on a model of `table`, placed on the noise
/// of a step computed before any canary counts (`noise`).
fn place_canaries(
    request: AuditRequest,
    config: &TrainConfig,
    plan: &Plan,
    noise: &StepNoise,
    table: &ParamTable,
) -> Result<WhiteBoxCanaries> {
    let sizes: Vec<usize> = table.params().iter().map(|p| p.len()).collect();
    let bound = plan.clipping.layer_bound(config.clip_norm, table.layers().len());
    WhiteBoxCanaries::for_run(request.canaries, plan.sample_rate, config.seed, &noise.scales, &sizes, bound)
}

fn append_line(path: &Path, value: &impl Serialize) -> Result<()> {
    let io = |e: std::io::Error| EngineError::Checkpoint { path: path.to_path_buf(), reason: e.to_string() };
    let mut f = OpenOptions::new().create(true).append(true).open(path).map_err(io)?;
    let line = serde_json::to_string(value).unwrap_or_default();
    writeln!(f, "{line}").map_err(io)
}

/// Drops the lines of `path` logged after `step`: a run killed after logging steps its last
/// checkpoint does not hold takes them again on resume, and would log them twice.
fn keep_metrics_until(path: &Path, step: u64) -> Result<()> {
    let Ok(text) = fs::read_to_string(path) else {
        return Ok(());
    };
    let kept: String = text
        .lines()
        .filter(|line| {
            let logged = serde_json::from_str::<serde_json::Value>(line).ok().and_then(|v| v["step"].as_u64());
            logged.is_some_and(|s| s <= step)
        })
        .map(|line| format!("{line}\n"))
        .collect();
    write_atomic(path, kept.as_bytes())
}

/// Everything a checkpoint is written from.
struct Snapshot<'a> {
    config_digest: &'a str,
    planned_steps: u64,
    step: u64,
    seconds: f64,
}

/// Writes the checkpoint of `model`, `optimizer` and `state` atomically.
fn save(
    snap: &Snapshot<'_>,
    model: &ZooModel,
    optimizer: &ModuleOptimizer,
    state: StepState,
    path: &Path,
) -> Result<()> {
    let record_err =
        |e: burn::store::RecordError| EngineError::Checkpoint { path: path.to_path_buf(), reason: format!("{e:?}") };
    let model_bytes = model.clone().into_record().into_bytes().map_err(record_err)?.to_vec();
    let optimizer_bytes = optimizer.into_bytes().map_err(record_err)?.to_vec();
    let released: Option<Vec<Vec<f32>>> = state.released.map(|r| r.iter().map(to_host).collect());
    let header = Header {
        config_digest: snap.config_digest.to_string(),
        planned_steps: snap.planned_steps,
        step: snap.step,
        ledger: state.ledger,
        sampler: state.sampler,
        noise: state.noise,
        seconds: snap.seconds,
        model_bytes: model_bytes.len() as u64,
        optimizer_bytes: optimizer_bytes.len() as u64,
        released: released.as_ref().map(|r| r.iter().map(Vec::len).collect()),
        model_digest: sha256_hex(&model_bytes),
        values_digest: values_digest(model),
    };
    Checkpoint { header, model: model_bytes, optimizer: optimizer_bytes, released }.save(path)
}

/// Trains as `config` says (or resumes the run in `config.out_dir`), reporting progress to
/// `observe`.
pub fn train(
    config: TrainConfig,
    session: Session,
    device: &SelectedDevice,
    observe: &mut dyn FnMut(&Event),
) -> Result<TrainReport> {
    let run_dir = config.out_dir.clone();
    let ckpt_path = checkpoint_path(&run_dir);
    if let Some(request) = session.audit {
        if session.resume || session.stop_after.is_some() {
            return Err(EngineError::invalid(
                "audit",
                "the canaries live in memory: audit a whole run in one session (no --resume or --stop-after)",
            ));
        }
        if !(request.confidence > 0.0 && request.confidence < 1.0) {
            return Err(EngineError::invalid("audit confidence", format!("{} is not in (0, 1)", request.confidence)));
        }
    }
    let (checkpoint, config) = match session.resume {
        // A resumed run continues with its own configuration, whatever else was passed.
        true => {
            let (ckpt, own) = load_checkpoint(&run_dir)?;
            (Some(ckpt), TrainConfig { out_dir: run_dir.clone(), ..own })
        }
        false => (None, config),
    };
    let mechanism: Arc<dyn Mechanism> = mechanism::for_config(&config)?.into();
    config.validate(mechanism.as_ref())?;
    let (train_data, test_data) = load_data(&config)?;
    let plan = plan(&config, mechanism.as_ref(), train_data.len())?;

    let spec = ModelSpec {
        name: config.model,
        activation: config.activation,
        hidden: config.hidden,
        normalization: config.normalization,
    };
    let dev = &device.device;
    let mut init_rng = ChaChaState::new(config.seed, INIT_STREAM).restore();
    let model = build(spec, train_data.shape(), train_data.classes(), &mut init_rng, dev)?;
    let fresh_optimizer = optimizer(config.optimizer(mechanism.as_ref()), config.momentum, config.weight_decay);
    let batching = Batching::for_backend(config.batch_size, device.backend);
    let source = CrossEntropyLots { data: &train_data };
    let fresh_table = ParamTable::of(&model)?;
    // Canaries (a fresh run only) are placed before anything is written.
    let canaries = match (session.audit, plan.z) {
        (Some(request), Some(z)) => {
            let (inference, table) = (model.valid(), &fresh_table);
            let noise = mechanism
                .allocation(z, &config, table, None)
                .step_noise(0, table, &mut || mean_gradient(&inference, &source, batching, table, None, dev))?;
            Some(place_canaries(request, &config, &plan, &noise, table)?)
        }
        (Some(_), None) => {
            return Err(EngineError::invalid(
                "audit",
                "white-box canaries are scored on the noisy release: the mechanism none releases no noise",
            ));
        }
        (None, _) => None,
    };
    let (config_digest, restored) = match checkpoint {
        Some(ckpt) => {
            let digest = ckpt.header.config_digest.clone();
            (digest, resume(ckpt, &config, &plan, mechanism.as_ref(), (model, fresh_optimizer), &ckpt_path, dev)?)
        }
        None => {
            dry_run(&model, &source, batching, &fresh_table, dev)?;
            let digest = start_run_folder(&run_dir, &config, plan.z, session.overwrite)?;
            let state = StepState::fresh(fresh_sampler(&config, &plan)?);
            (digest, Restored { model: model.train(), optimizer: fresh_optimizer, state, step: 0, seconds: 0.0 })
        }
    };
    let Restored { mut model, optimizer, state, mut step, mut seconds } = restored;
    let metrics_path = run_dir.join("metrics.jsonl");
    if session.resume {
        keep_metrics_until(&metrics_path, step)?;
    }
    // After a resume the parameters carry the checkpoint's ids: the table is taken from them.
    let table = ParamTable::of(&model)?;
    let start = StartFrom { state, steps_taken: step, canaries };
    let mut dp = DpOptimizer::assemble(config.clone(), mechanism, plan, &table, optimizer, start, device);
    let planned_steps = dp.planned_steps();
    observe(&Event::Started {
        device: format!("{} ({})", device.backend, device.name),
        parameters: table.num_params(),
        train_examples: train_data.len(),
        sample_rate: dp.sample_rate(),
        noise_multiplier: dp.noise_multiplier(),
        planned_steps,
        start_step: step,
        planned_privacy: dp.planned_privacy().clone(),
        planned_sigma_privacy: dp.planned_second_readout().cloned(),
        notes: dp.notes().to_vec(),
    });
    let steps_per_epoch = ((train_data.len() as f64 / config.lot_size as f64).round() as u64).max(1);
    let log_every = (steps_per_epoch / 10).max(1);
    let mut segment = Instant::now();
    let mut interrupted = false;
    let stop_at = session.stop_after.map_or(planned_steps, |s| (step + s).min(planned_steps));
    while step < stop_at {
        let (next, metrics) = dp.step(model, &source, config.learning_rate)?;
        model = next;
        step += 1;
        if step % log_every == 0 || step == planned_steps {
            if let Some((loss, accuracy)) = metrics.read() {
                if !loss.is_finite() {
                    return Err(EngineError::Diverged(format!(
                        "loss is {loss} at step {step}; lower --learning-rate (the last checkpoint is kept)"
                    )));
                }
                let event = Event::Step { step, loss, accuracy };
                append_line(&metrics_path, &event)?;
                observe(&event);
            }
        }
        if step % steps_per_epoch == 0 || step == planned_steps {
            let event =
                Event::Evaluated { step, test_accuracy: evaluate(&model, &test_data, dev), privacy: dp.privacy()? };
            append_line(&metrics_path, &event)?;
            observe(&event);
        }
        interrupted = session.interrupt.is_some_and(|flag| flag.load(Ordering::SeqCst));
        if (config.checkpoint_every > 0 && step % config.checkpoint_every == 0) || step == stop_at || interrupted {
            seconds += segment.elapsed().as_secs_f64();
            segment = Instant::now();
            let snap = Snapshot { config_digest: &config_digest, planned_steps, step, seconds };
            save(&snap, &model, dp.optimizer(), dp.state(), &ckpt_path)?;
        }
        if interrupted {
            break;
        }
    }
    let test_accuracy = evaluate(&model, &test_data, dev);
    let spent = dp.privacy()?;
    let report = TrainReport {
        test_accuracy,
        epsilon: spent.epsilon,
        delta: spent.delta,
        accountant: spent.accountant,
        guarantee: spent.guarantee,
        sigma_privacy: dp.second_readout()?,
        steps: step,
        seconds,
        noise_multiplier: dp.noise_multiplier(),
        sample_rate: dp.sample_rate(),
        device: format!("{} ({})", device.backend, device.name),
        model: config.model.as_str().into(),
        mechanism: config.mechanism,
        seeded: config.seed.is_some(),
        notes: dp.notes().to_vec(),
        run_dir: run_dir.clone(),
        completed: step == planned_steps,
        interrupted: interrupted && step < planned_steps,
        audit: session.audit.zip(dp.canaries()).map(|(request, c)| c.audit(spent.delta, request.confidence)),
    };
    let json = serde_json::to_vec_pretty(&report).unwrap_or_default();
    write_atomic(&run_dir.join("report.json"), &json)?;
    Ok(report)
}
