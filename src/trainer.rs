//! `dptrain train`: a zoo model on an image dataset, trained by the DP step (or, for the
//! baseline, by plain Burn training) with a burn-optim optimiser, the privacy ledger recorded by
//! the step itself, evaluation, metrics, checkpoints and resume. The run is set up in named
//! pieces: [`dp_engine::plan`] (steps, noise multiplier, budget check), the run folder, a fresh start
//! (with the library's dry run) or [`resume`] (every privacy-relevant field of the checkpoint
//! checked against the run), canary placement; then the loop steps the library's
//! [`DpOptimizer`], as a library user would.

use crate::cache_dir::cache_dir;
use crate::checkpoint::{self, Checkpoint, Header, checkpoint_path};
use crate::curves;
use crate::fetch::remote::remote;
use crate::fetch::{complete, default_folder};
use crate::run_folder::keys::RunKeys;
use crate::run_folder::lock::RunLock;
use crate::run_folder::{self, METRICS_FILE, sha256_hex};
use crate::scattered::scattered;
use crate::train_config::TrainConfig;
use crate::zoo::{ModelSpec, ZooModel, build, footprint};
use burn::module::Module;
use burn::tensor::Device;
use dp_accounting::PrivacyReport;
use dp_data::safe_files::file_error;
use dp_data::{ChaChaState, CropFlip, DatasetName, ImageDataset, Split};
use dp_engine::augmented_lots::AugmentedLots;
use dp_engine::backend::SelectedDevice;
use dp_engine::canaries::{AuditRequest, RunAudit, WhiteBoxCanaries};
use dp_engine::classifier::{CrossEntropyLots, evaluate};
use dp_engine::dp_checkpoint::values_digest;
use dp_engine::dp_optimizer::DpOptimizer;
use dp_engine::error::{EngineError, Result};
use dp_engine::grad_sample::params::ParamTable;
use dp_engine::mechanism::MechanismName;
use dp_engine::optimizer::optimizer;
use dp_engine::plan::Plan;
use dp_engine::privacy_config::PrivacyConfig;
use dp_engine::privacy_engine::PrivacyEngine;
use dp_engine::scatter_net::ScatterNet;
use dp_engine::step::batching::Batching;
use dp_engine::step::lot::{LotSource, mean_gradient};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

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
        planned_privacy: Box<PrivacyReport>,
        /// optimized-paper: the epsilon of the smallest sigma it will use (label none).
        planned_sigma_privacy: Option<Box<PrivacyReport>>,
        /// Caveats the user must read.
        notes: Vec<String>,
    },
    /// ScatterNet features are being computed (not found in the cache).
    Scattering {
        /// Examples to transform.
        examples: usize,
        /// Where they will be cached (None: nowhere, no cache folder is known).
        cache: Option<PathBuf>,
    },
    /// A step was taken (every step; nothing is read from the device for it).
    Progress {
        /// Steps done.
        step: u64,
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
        privacy: PrivacyReport,
    },
}

impl Event {
    /// The start of a session of `dp` on `device`, for a model of `table` on `train_examples`,
    /// from step `start_step`.
    fn started(
        dp: &DpOptimizer<ZooModel>,
        device: &SelectedDevice,
        table: &ParamTable,
        train_examples: usize,
        start_step: u64,
    ) -> Self {
        Event::Started {
            device: format!("{} ({})", device.backend, device.name),
            parameters: table.num_params(),
            train_examples,
            sample_rate: dp.sample_rate(),
            noise_multiplier: dp.noise_multiplier(),
            planned_steps: dp.planned_steps(),
            start_step,
            planned_privacy: Box::new(dp.planned_privacy().clone()),
            planned_sigma_privacy: dp.planned_second_readout().cloned().map(Box::new),
            notes: dp.notes().to_vec(),
        }
    }
}

/// The final report of a run (also written to report.json).
#[derive(Debug, Clone, Serialize)]
pub struct TrainReport {
    /// Accuracy of the final model on the set it is evaluated on.
    pub test_accuracy: f64,
    /// That set: `test`, or `validation` (the held-out end of the training set, `--validation`).
    pub evaluated_on: &'static str,
    /// Epsilon spent (infinite for the baseline, null in JSON), its delta, accountant and
    /// label.
    #[serde(flatten)]
    pub privacy: PrivacyReport,
    /// optimized-paper: the epsilon of the Gaussian mechanism with the smallest sigma used
    /// (label none: w came from the private data).
    pub sigma_privacy: Option<PrivacyReport>,
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
    /// Its plot of test accuracy and training loss against steps and epsilon.
    pub curves: PathBuf,
    /// False when this session stopped before the planned steps (resume to continue).
    pub completed: bool,
    /// True when an interruption (Ctrl-C, SIGTERM) stopped this session early.
    pub interrupted: bool,
    /// The one-run audit, when one was asked for.
    pub audit: Option<RunAudit>,
}

/// The folder of a named dataset: `dir`; without one, where `dptrain data fetch` put it, else
/// its standard location (Debian's package), else refused with the fetch command.
pub fn data_folder(name: DatasetName, dir: Option<&Path>) -> Result<PathBuf> {
    let fetched = || default_folder(name).filter(|d| complete(name, d));
    let standard = || name.default_dir().filter(|d| d.is_dir());
    dir.map(Path::to_path_buf).or_else(fetched).or_else(standard).ok_or_else(|| {
        let folder = remote(name).folder;
        EngineError::invalid(
            "data dir",
            format!("{folder} is not on this machine: run `dptrain data fetch {folder}`, or give --data-dir"),
        )
    })
}

/// The training and test sets of a run, refused when their shapes or classes differ (the
/// model could not evaluate the test set after training); a ScatterNet model's are their
/// features (`scattered`, cached), whose computation `observe` is told of, except the training
/// images of a run with augmented views, which are transformed view by view as they are drawn.
fn load_data(
    config: &TrainConfig,
    interrupt: Option<&AtomicBool>,
    observe: &mut dyn FnMut(&Event),
) -> Result<(ImageDataset, ImageDataset)> {
    // The folder is found once: a fetched one is verified by hashing its files.
    let folder = data_folder(config.dataset, config.data_dir.as_deref())?;
    let train = config.dataset.load(&folder, Split::Train)?;
    let (train, test) = match config.validation {
        None => (train, config.dataset.load(&folder, Split::Test)?),
        Some(held) if held > 0 && held < train.len() => {
            let at = train.len() - held;
            train.split_off(at)
        }
        Some(held) => {
            return Err(EngineError::invalid(
                "validation",
                format!(
                    "{held} held-out examples: give between 1 and {} for {} training examples",
                    train.len().max(1) - 1,
                    train.len()
                ),
            ));
        }
    };
    for (set, name) in [(&train, "training"), (&test, "test")] {
        if set.is_empty() {
            return Err(EngineError::Data(format!("the {name} set of {:?} holds no example", config.dataset)));
        }
    }
    if train.shape() != test.shape() || train.classes() != test.classes() {
        return Err(EngineError::Data(format!(
            "the test set's examples are {:?} in {} classes, the training set's {:?} in {}",
            test.shape(),
            test.classes(),
            train.shape(),
            train.classes()
        )));
    }
    if !config.model.reads_scattering() {
        return Ok((train, test));
    }
    let cache = cache_dir();
    let mut features = |set: &ImageDataset| {
        scattered(set, cache.as_deref(), interrupt, &mut |examples| {
            observe(&Event::Scattering { examples, cache: cache.clone() })
        })
    };
    let train = if config.augmult.is_some() { train } else { features(&train)? };
    Ok((train, features(&test)?))
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
    /// Keep the run's key file when it completes (it is removed otherwise).
    pub keep_key: bool,
}

/// The run in `run_dir` as its folder holds it: its keys and its configuration (with the key
/// file's seed) and config.toml's digest, which the checkpoint must name. A `seed` given with
/// --resume must be the run's.
fn load_run(run_dir: &Path, seed: Option<u64>) -> Result<(TrainConfig, RunKeys, String)> {
    let keys = run_folder::read_keys(run_dir)?;
    let (config, digest) = run_folder::read_config(run_dir)?;
    if seed.is_some() && seed != keys.seed {
        return Err(EngineError::invalid(
            "seed",
            "--resume takes the run's own seed (from its key file): drop --seed or give the run's",
        ));
    }
    Ok((TrainConfig { seed: keys.seed, out_dir: run_dir.to_path_buf(), ..config }, keys, digest))
}

/// The run's checkpoint, no larger than a model of `params` parameters can make it, its MAC
/// checked under the key file's key, refused unless it belongs to the config.toml of `digest`
/// (the configuration decides every other check) and agrees with the key file on the seed.
fn load_checkpoint(run_dir: &Path, keys: &RunKeys, digest: &str, params: usize) -> Result<Checkpoint> {
    let path = checkpoint_path(run_dir);
    let ckpt = Checkpoint::load(&path, keys.mac(), checkpoint::size_bound(params))?;
    let refuse = |reason: &str| EngineError::Checkpoint { path: path.clone(), reason: reason.into() };
    if digest != ckpt.header.config_digest {
        return Err(refuse("the run folder's config.toml is not the one this checkpoint belongs to"));
    }
    if ckpt.header.seeded != keys.seed.is_some() {
        return Err(refuse("it says the run is seeded where the key file does not, or the reverse"));
    }
    Ok(ckpt)
}

/// Seconds since the Unix epoch.
fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// How far the clock of a machine resuming a run may disagree with the one that started it.
const CLOCK_SLACK: u64 = 86_400;

/// What canaries are placed for: the run's privacy configuration (with the mechanism), its plan
/// and the device.
#[derive(Clone, Copy)]
struct RunOf<'a> {
    privacy: &'a PrivacyConfig,
    plan: &'a Plan,
    device: &'a Device,
}

/// The run folder's own checks of a checkpoint before the library resumes it: the training
/// seconds against the clock (everything the privacy claim depends on is checked by
/// `PrivacyEngine::resume`).
fn check_clock(h: &Header, path: &Path) -> Result<()> {
    let now = unix_now();
    let elapsed = now.saturating_sub(h.started) + CLOCK_SLACK;
    if !(h.seconds.is_finite() && h.seconds >= 0.0 && h.seconds <= elapsed as f64) || h.started > now + CLOCK_SLACK {
        return Err(EngineError::Checkpoint {
            path: path.to_path_buf(),
            reason: format!(
                "{} training seconds for a run started at Unix time {}, {} s ago",
                h.seconds,
                h.started,
                now.saturating_sub(h.started)
            ),
        });
    }
    Ok(())
}

/// Canaries for a one-run audit of `run` on `model`, placed on the noise of a step
/// computed before any canary counts. Refused for the baseline, which releases no noise.
fn place_canaries(
    request: AuditRequest,
    run: &RunOf<'_>,
    model: &ZooModel,
    source: &dyn LotSource<ZooModel>,
    batching: Batching,
) -> Result<WhiteBoxCanaries> {
    let RunOf { privacy, plan, device } = *run;
    let table = &ParamTable::of(model)?;
    let Some(z) = plan.z else {
        return Err(EngineError::invalid(
            "audit",
            "white-box canaries are scored on the noisy release: the mechanism none releases no noise",
        ));
    };
    let inference = model.valid();
    let noise = privacy
        .mechanism
        .allocation(z, &privacy.settings, table)
        .step_noise(0, table, &mut || mean_gradient(&inference, source, batching, table, device))?;
    let sizes: Vec<usize> = table.params().iter().map(|p| p.len()).collect();
    let bound = plan.clipping.layer_bound(privacy.settings.clip_norm, table.layers().len());
    WhiteBoxCanaries::for_run(request.canaries, plan.sample_rate, privacy.settings.seed, &noise.scales, &sizes, bound)
}

/// Everything a checkpoint is written from besides the model and the step's state.
struct Snapshot<'a> {
    config_digest: &'a str,
    seeded: bool,
    started: u64,
    seconds: f64,
}

/// Writes the checkpoint of `model` and `dp` atomically, sealed with `keys`.
fn save(snap: &Snapshot<'_>, model: &ZooModel, dp: &DpOptimizer<ZooModel>, keys: &RunKeys, path: &Path) -> Result<()> {
    let state = dp
        .checkpoint(model)
        .map_err(|e| EngineError::Checkpoint { path: path.to_path_buf(), reason: e.to_string() })?;
    let header = Header {
        config_digest: snap.config_digest.to_string(),
        seeded: snap.seeded,
        started: snap.started,
        seconds: snap.seconds,
        model_digest: sha256_hex(&state.model),
        values_digest: values_digest(model),
    };
    Checkpoint { header, state }.save(path, keys.mac())
}

/// Refuses session options that cannot go together.
fn check_session(session: &Session, run_dir: &Path) -> Result<()> {
    if run_dir.as_os_str().is_empty() {
        return Err(EngineError::invalid("out dir", "is empty: name the run's folder"));
    }
    if session.stop_after == Some(0) {
        return Err(EngineError::invalid("stop after", "0 steps would leave nothing to resume: give at least 1"));
    }
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
    Ok(())
}

/// The training lots with `--augmult` views of each image (random crops after reflect padding,
/// mirrored as configured), transformed to ScatterNet features
/// for a ScatterNet model; None without `--augmult`. The views are drawn with the run's sampler
/// key (from the key file on `--resume`), so a resumed run, seeded or not, draws the views the
/// whole run would have.
fn augmented_lots<'a>(
    config: &TrainConfig,
    train: &'a ImageDataset,
    keys: &RunKeys,
) -> Result<Option<AugmentedLots<'a>>> {
    let Some(views) = config.augmult else { return Ok(None) };
    let mirror = config.augment_mirror.unwrap_or(config.dataset.mirrors_keep_labels());
    let padding = config.augment_padding.unwrap_or(dp_data::augment::DEFAULT_PADDING);
    let augmentation = CropFlip::new(padding, mirror, train.shape())?;
    let lots = AugmentedLots::new(train, augmentation, views, keys.streams().sampler_key().clone())?;
    Ok(Some(if config.model.reads_scattering() { lots.with_features(ScatterNet::new(train.shape())?)? } else { lots }))
}

/// The model of `spec` for `data`, refused from arithmetic when a step on physical batches of
/// `batch` examples would not fit the memory budget.
fn checked_model(
    spec: ModelSpec,
    data: &ImageDataset,
    batch: usize,
    seed: Option<u64>,
    dev: &Device,
) -> Result<ZooModel> {
    let [c, h, w] = data.shape();
    let bytes = footprint(spec, data.shape(), data.classes())?.step_bytes(batch);
    dp_data::memory::check(
        &format!("a step of {} on batches of {batch} images of {c}x{h}x{w}", spec.name.as_str()),
        bytes,
    )?;
    let mut init_rng = ChaChaState::new(seed, INIT_STREAM).restore();
    build(spec, data.shape(), data.classes(), &mut init_rng, dev)
}

/// Trains as `config` says (or resumes the run in `config.out_dir`), reporting progress to
/// `observe`. The run folder's lock is held from the first write (or, resuming, the first read)
/// to the end.
pub fn train(
    config: TrainConfig,
    session: Session,
    device: &SelectedDevice,
    observe: &mut dyn FnMut(&Event),
) -> Result<TrainReport> {
    let run_dir = config.out_dir.clone();
    check_session(&session, &run_dir)?;
    let ckpt_path = checkpoint_path(&run_dir);
    let Opened { mut lock, resumed, config, keys } = open_run(config, &session, &run_dir)?;
    let privacy = config.privacy()?;
    config.validate(&privacy)?;
    let (train_data, test_data) = load_data(&config, session.interrupt, observe)?;

    let spec = ModelSpec {
        name: config.model,
        activation: config.activation,
        hidden: config.hidden,
        normalization: config.normalization,
    };
    let dev = &device.device;
    let batching = Batching::for_device(config.batch_size, device);
    // The model reads what it is evaluated on: a ScatterNet model's features even where the
    // training set is images (transformed view by view). A physical batch holds at least one
    // example's views, beyond --batch-size when they outnumber it.
    let rows = batching.padded(config.batch_size.min(train_data.len())).max(config.augmult.unwrap_or(1));
    let model = checked_model(spec, &test_data, rows, config.seed, dev)?;
    let fresh_optimizer = optimizer(config.optimizer(&privacy), config.momentum, config.weight_decay);
    let plain = CrossEntropyLots { data: &train_data };
    let augmented = augmented_lots(&config, &train_data, &keys)?;
    let source: &dyn LotSource<ZooModel> = match &augmented {
        Some(lots) => lots,
        None => &plain,
    };
    // The library plans and sets the DP run up, with the run folder's keys.
    let engine =
        PrivacyEngine::new(privacy.clone()).with_batch_size(config.batch_size).with_keys(keys.streams().clone());
    let (config_digest, started, seconds, model, mut dp) = match resumed {
        Some(digest) => {
            let ckpt = load_checkpoint(&run_dir, &keys, &digest, model.num_params())?;
            check_clock(&ckpt.header, &ckpt_path)?;
            let refuse = |e: EngineError| EngineError::Checkpoint { path: ckpt_path.clone(), reason: e.to_string() };
            let (model, dp) = engine.resume((model, fresh_optimizer), source, dev, ckpt.state).map_err(refuse)?;
            (ckpt.header.config_digest, ckpt.header.started, ckpt.header.seconds, model, dp)
        }
        None => {
            let mut dp = engine.make_private(&model, fresh_optimizer, source, dev)?;
            if let Some(decay) = config.ema {
                dp.set_parameter_averaging(decay)?;
            }
            // Canaries (a fresh run only) are placed before anything is written.
            if let Some(request) = session.audit {
                let run = RunOf { privacy: &privacy, plan: dp.plan(), device: dev };
                let canaries = place_canaries(request, &run, &model, source, batching)?;
                dp.set_hook(Box::new(canaries))?;
            }
            lock = Some(RunLock::acquire(&run_dir)?);
            let digest = run_folder::start(&config.out_dir, &config, dp.noise_multiplier(), session.overwrite, &keys)?;
            (digest, unix_now(), 0.0, model.train(), dp)
        }
    };
    let lock = lock.ok_or_else(|| file_error(&run_dir, "the run folder is not locked"))?;
    let step = dp.steps_taken();
    let metrics_path = run_dir.join(METRICS_FILE);
    if session.resume {
        run_folder::keep_metrics_until(&metrics_path, step)?;
    }
    // After a resume the parameters carry the checkpoint's ids: the table is taken from them.
    let table = ParamTable::of(&model)?;
    observe(&Event::started(&dp, device, &table, train_data.len(), step));
    let steps = StepLoop {
        config: &config,
        session: &session,
        source,
        test_data: &test_data,
        device: dev,
        metrics_path,
        ckpt_path,
        keys: &keys,
        lock: &lock,
        config_digest,
        started,
    };
    let ended = steps.run(&mut dp, Ended { model, step, seconds, interrupted: false }, observe)?;
    let report = finish(&dp, &ended, &config, &session, device, &test_data, &lock)?;
    if report.completed && !session.keep_key {
        RunKeys::remove(&run_dir)?;
    }
    Ok(report)
}

/// A run folder opened for this invocation: its lock (a resumed run takes it at once), the
/// digest of a resumed run's config.toml (its checkpoint is loaded once the model says how large
/// it may be), the configuration the run goes on with, and its keys.
struct Opened {
    lock: Option<RunLock>,
    resumed: Option<String>,
    config: TrainConfig,
    keys: RunKeys,
}

/// Opens the run: a resumed run continues with its own configuration, whatever else was passed;
/// a fresh one draws its keys (from the seed of a `--seed` run).
fn open_run(config: TrainConfig, session: &Session, run_dir: &Path) -> Result<Opened> {
    if session.resume {
        let lock = RunLock::acquire(run_dir)?;
        let (own, keys, digest) = load_run(run_dir, config.seed)?;
        return Ok(Opened { lock: Some(lock), resumed: Some(digest), config: own, keys });
    }
    let keys = RunKeys::generate(config.seed);
    Ok(Opened { lock: None, resumed: None, config, keys })
}

/// Where the step loop is: the model and the steps and seconds so far, and whether it was
/// interrupted.
struct Ended {
    model: ZooModel,
    step: u64,
    seconds: f64,
    interrupted: bool,
}

/// What the step loop needs besides the optimiser and the model.
struct StepLoop<'a> {
    config: &'a TrainConfig,
    session: &'a Session,
    source: &'a dyn LotSource<ZooModel>,
    test_data: &'a ImageDataset,
    device: &'a Device,
    metrics_path: PathBuf,
    ckpt_path: PathBuf,
    keys: &'a RunKeys,
    lock: &'a RunLock,
    config_digest: String,
    started: u64,
}

impl StepLoop<'_> {
    /// Steps from `at` until the plan, `--stop-after` or an interrupt ends the session: metrics
    /// every tenth of an epoch, an evaluation every epoch, a checkpoint as configured and at the
    /// end.
    fn run(&self, dp: &mut DpOptimizer<ZooModel>, at: Ended, observe: &mut dyn FnMut(&Event)) -> Result<Ended> {
        let (config, session) = (self.config, self.session);
        let Ended { mut model, mut step, mut seconds, mut interrupted } = at;
        let planned_steps = dp.planned_steps();
        let steps_per_epoch = ((self.source.len() as f64 / config.lot_size as f64).round() as u64).max(1);
        let log_every = (steps_per_epoch / 10).max(1);
        let mut segment = Instant::now();
        let stop_at = session.stop_after.map_or(planned_steps, |s| step.saturating_add(s).min(planned_steps));
        while step < stop_at {
            let lr = config.lr_schedule.rate(config.learning_rate, step, planned_steps);
            let (next, metrics) = dp.step(model, self.source, lr)?;
            model = next;
            step += 1;
            observe(&Event::Progress { step });
            if (step % log_every == 0 || step == planned_steps)
                && let Some((loss, accuracy)) = metrics.read()
            {
                if !loss.is_finite() {
                    return Err(EngineError::Diverged(format!(
                        "loss is {loss} at step {step}; lower --learning-rate (the last checkpoint is kept)"
                    )));
                }
                self.log(&Event::Step { step, loss, accuracy }, observe)?;
            }
            if step % steps_per_epoch == 0 || step == planned_steps {
                let test_accuracy = evaluate(dp.averaged().unwrap_or(&model), self.test_data, self.device)?;
                self.log(&Event::Evaluated { step, test_accuracy, privacy: dp.privacy()? }, observe)?;
            }
            interrupted = session.interrupt.is_some_and(|flag| flag.load(Ordering::SeqCst));
            if (config.checkpoint_every > 0 && step % config.checkpoint_every == 0) || step == stop_at || interrupted {
                seconds += segment.elapsed().as_secs_f64();
                segment = Instant::now();
                let snap = Snapshot {
                    config_digest: &self.config_digest,
                    seeded: config.seed.is_some(),
                    started: self.started,
                    seconds,
                };
                self.lock.held()?;
                save(&snap, &model, dp, self.keys, &self.ckpt_path)?;
            }
            if interrupted {
                break;
            }
        }
        Ok(Ended { model, step, seconds, interrupted })
    }

    /// Appends `event` to the run's metrics and shows it.
    /// After an evaluation, the run folder's curves are redrawn.
    fn log(&self, event: &Event, observe: &mut dyn FnMut(&Event)) -> Result<()> {
        self.lock.held()?;
        run_folder::log(&self.metrics_path, event)?;
        if let (Event::Evaluated { .. }, Some(run_dir)) = (event, self.metrics_path.parent()) {
            curves::redraw(run_dir)?;
        }
        observe(event);
        Ok(())
    }
}

/// The report of the session that `ended`, written to the run folder.
fn finish(
    dp: &DpOptimizer<ZooModel>,
    ended: &Ended,
    config: &TrainConfig,
    session: &Session,
    device: &SelectedDevice,
    test_data: &ImageDataset,
    lock: &RunLock,
) -> Result<TrainReport> {
    let spent = dp.privacy()?;
    let delta = spent.delta;
    let planned_steps = dp.planned_steps();
    let report = TrainReport {
        test_accuracy: evaluate(dp.averaged().unwrap_or(&ended.model), test_data, &device.device)?,
        evaluated_on: config.evaluated_on(),
        privacy: spent,
        sigma_privacy: dp.second_readout()?,
        steps: ended.step,
        seconds: ended.seconds,
        noise_multiplier: dp.noise_multiplier(),
        sample_rate: dp.sample_rate(),
        device: format!("{} ({})", device.backend, device.name),
        model: config.model.as_str().into(),
        mechanism: config.mechanism,
        seeded: config.seed.is_some(),
        notes: dp.notes().to_vec(),
        run_dir: config.out_dir.clone(),
        curves: config.out_dir.join(run_folder::PLOT_FILE),
        completed: ended.step == planned_steps,
        interrupted: ended.interrupted && ended.step < planned_steps,
        audit: session
            .audit
            .zip(dp.hook().and_then(|h| h.as_any().downcast_ref::<WhiteBoxCanaries>()))
            .map(|(request, c)| c.audit(delta, request.confidence)),
    };
    lock.held()?;
    run_folder::write_report(&config.out_dir, &report)?;
    Ok(report)
}
