//! The training loop: data, model, privacy calibration, DP steps recorded in a ledger that can
//! never exceed the planned (and budgeted) steps, evaluation, metrics, checkpoints and resume.

use crate::allocation::NoiseAllocation;
use crate::backend::SelectedDevice;
use crate::canaries::{AuditRequest, RunAudit, WhiteBoxCanaries};
use crate::checkpoint::{CHECKPOINT_VERSION, Checkpoint, write_atomic};
use crate::error::{EngineError, Result};
use crate::features::Features;
use crate::loss::correct;
use crate::model::Model;
use crate::noise::GaussianNoise;
use crate::optimizer::{Optimizer, OptimizerKind};
use crate::step::{Batching, ExampleSource, Privatizer, StepDraw, lot_gradient, mean_gradient};
use crate::tensor_io::{HostMatrix, matrices_from_host, matrices_to_host};
use crate::train_config::{AccountantName, Mechanism, OptimizerName, SamplingName, TrainConfig};
use crate::zoo::{ModelSpec, build};
use dp_accounting::paper_bounds::xiang2019;
use dp_accounting::{Accountant, Guarantee, PrivacyLedger, PrvAccountant, RdpAccountant, calibrate_noise_multiplier};
use dp_data::{ChaChaState, DatasetName, ImageDataset, LotSampler, Sampling, Split};
use serde::Serialize;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The ChaCha20 stream reserved for parameter initialisation.
const INIT_STREAM: u64 = 2;
/// Examples per batch when evaluating.
const EVAL_BATCH: usize = 1000;

/// An epsilon with everything needed to read it.
#[derive(Debug, Clone, Serialize)]
pub struct PrivacySpent {
    /// Epsilon (None: no privacy at all, the unperturbed baseline).
    pub epsilon: Option<f64>,
    /// Delta.
    pub delta: f64,
    /// Accountant that computed it.
    pub accountant: String,
    /// How much to trust it.
    pub guarantee: Guarantee,
}

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
        accuracy: f64,
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
    pub mechanism: Mechanism,
    /// True when the run was seeded (reproducible).
    pub seeded: bool,
    /// Caveats.
    pub notes: Vec<String>,
    /// The run folder.
    pub run_dir: PathBuf,
    /// False when this session stopped before the planned steps (resume to continue).
    pub completed: bool,
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

fn accountant(name: AccountantName) -> Box<dyn Accountant> {
    match name {
        AccountantName::Rdp => Box::new(RdpAccountant::default()),
        AccountantName::Prv => Box::new(PrvAccountant::default()),
    }
}

/// The privacy of `ledger` (the steps taken of `planned` steps) under the run's configuration:
/// what the accountant certifies, or for optimized-paper the paper's claim (Eq. 12 spends the
/// budget evenly: epsilon * sqrt(steps / planned) after `steps` steps).
fn privacy(config: &TrainConfig, ledger: &PrivacyLedger, planned: u64) -> Result<PrivacySpent> {
    if config.mechanism == Mechanism::None {
        return Ok(PrivacySpent {
            epsilon: None,
            delta: config.delta,
            accountant: "none".into(),
            guarantee: Guarantee::None,
        });
    }
    if let (Mechanism::OptimizedPaper, Some(target)) = (config.mechanism, config.target_epsilon) {
        let done = ledger.total_steps() as f64 / planned.max(1) as f64;
        return Ok(PrivacySpent {
            epsilon: Some(target * done.sqrt()),
            delta: config.delta,
            accountant: "xiang2019-eq12".into(),
            guarantee: Guarantee::PaperBound,
        });
    }
    certified(config, ledger)
}

/// What the run's accountant gives for `ledger` (labelled none for shuffled lots).
fn certified(config: &TrainConfig, ledger: &PrivacyLedger) -> Result<PrivacySpent> {
    if ledger.is_empty() {
        return Ok(PrivacySpent {
            epsilon: Some(0.0),
            delta: config.delta,
            accountant: accountant(config.accountant).name().to_string(),
            guarantee: Guarantee::Certified,
        });
    }
    let report =
        accountant(config.accountant).epsilon(ledger, config.delta).map_err(|e| EngineError::Privacy(e.to_string()))?;
    let guarantee = match config.sampling {
        SamplingName::Poisson => report.guarantee,
        SamplingName::Shuffled => Guarantee::None,
    };
    Ok(PrivacySpent { epsilon: Some(report.epsilon), delta: report.delta, accountant: report.accountant, guarantee })
}

/// For optimized-paper: the epsilon of the Gaussian mechanism with the smallest sigma actually
/// used, labelled none because w was computed from the private data (an unaccounted release).
fn sigma_privacy(config: &TrainConfig, ledger: &PrivacyLedger) -> Result<Option<PrivacySpent>> {
    if config.mechanism != Mechanism::OptimizedPaper {
        return Ok(None);
    }
    Ok(Some(PrivacySpent { guarantee: Guarantee::None, ..certified(config, ledger)? }))
}

fn notes(config: &TrainConfig) -> Vec<String> {
    let mut notes = Vec::new();
    match config.mechanism {
        Mechanism::None => notes.push("--mechanism none: no clipping and no noise, so no privacy at all".into()),
        Mechanism::LsSgd | Mechanism::LsAdam => notes.push(
            "Laplacian smoothing acts on the noisy gradient: post-processing, so the epsilon is that of the Gaussian mechanism".into(),
        ),
        Mechanism::Optimized => notes.push(
            "optimized: per-layer clipping, a sigma per layer with sum_g C_g^2 / sigma_g^2 = 1 / z^2 (exactly the Gaussian mechanism with noise multiplier z), allocated from past released gradients (post-processing)".into(),
        ),
        Mechanism::OptimizedPaper => {
            notes.push("optimized-paper: the epsilon is the paper's claim (Eq. 12 with the corrected tau), label paper-bound".into());
            notes.push("under L2 clipping the worst case is alpha^2 / min sigma^2, so the true guarantee is that of the Gaussian mechanism with noise multiplier min sigma / alpha; the coordinates with larger sigma only add noise".into());
            notes.push("w is the gradient of the private training data, released into the noise without accounting: the sigma readout is labelled none".into());
        }
        Mechanism::Gaussian => {}
    }
    if config.mechanism.is_private() {
        if config.sampling == SamplingName::Shuffled {
            notes.push(
                "shuffled lots are not Poisson sampling: the epsilon is what Poisson sampling would give, not a guarantee (label none)".into(),
            );
        }
        if config.seed.is_some() {
            notes.push("reproducible run: sampling and noise derive from --seed, so the guarantee holds only while the seed stays secret".into());
        }
    }
    notes
}

/// Resolves the noise multiplier: given, or calibrated for the planned steps.
fn noise_multiplier(config: &TrainConfig, sample_rate: f64, steps: u64) -> Result<Option<f64>> {
    if config.mechanism == Mechanism::None {
        return Ok(None);
    }
    if let (Mechanism::OptimizedPaper, Some(target)) = (config.mechanism, config.target_epsilon) {
        let privacy = |e: dp_accounting::AccountingError| EngineError::Privacy(e.to_string());
        let budget = xiang2019::per_step_budget(target, config.delta, sample_rate, steps).map_err(privacy)?;
        let (tau, _) = xiang2019::tau_corrected(budget).map_err(privacy)?;
        return Ok(Some(xiang2019::noise_multiplier_for_tau(tau).map_err(privacy)?));
    }
    match (config.noise_multiplier, config.target_epsilon) {
        (Some(z), _) => Ok(Some(z)),
        (None, Some(target)) => {
            let acc = accountant(config.accountant);
            let c = calibrate_noise_multiplier(acc.as_ref(), target, config.delta, sample_rate, steps)
                .map_err(|e| EngineError::Privacy(e.to_string()))?;
            Ok(Some(c.noise_multiplier))
        }
        (None, None) => Err(EngineError::invalid("privacy", "no noise multiplier or target epsilon")),
    }
}

/// Test accuracy of `model` on `data`.
pub fn evaluate(model: &Model, data: &ImageDataset, device: &burn::tensor::Device) -> Result<f64> {
    let indices: Vec<usize> = (0..data.len()).collect();
    let mut total = None;
    for chunk in indices.chunks(EVAL_BATCH) {
        let (x, labels): (Features, Vec<u8>) = ExampleSource::batch(data, chunk, device);
        let batch = correct(model.forward(x, None)?, &labels, device);
        total = Some(total.map_or(batch.clone(), |t| t + batch));
    }
    let total = total.map_or(0, |t| t.into_scalar::<i64>());
    Ok(total as f64 / data.len().max(1) as f64)
}

fn append_line(path: &Path, value: &impl Serialize) -> Result<()> {
    let io = |e: std::io::Error| EngineError::Checkpoint { path: path.to_path_buf(), reason: e.to_string() };
    let mut f = OpenOptions::new().create(true).append(true).open(path).map_err(io)?;
    let line = serde_json::to_string(value).unwrap_or_default();
    writeln!(f, "{line}").map_err(io)
}

fn optimizer_kind(config: &TrainConfig) -> OptimizerKind {
    match config.optimizer() {
        OptimizerName::Sgd => OptimizerKind::Sgd { momentum: config.momentum },
        OptimizerName::Adam => OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, epsilon: 1e-8 },
    }
}

/// The checkpoint file of a run folder.
pub fn checkpoint_path(run_dir: &Path) -> PathBuf {
    run_dir.join("checkpoint.json")
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
    let checkpoint = if session.resume { Some(Checkpoint::load(&ckpt_path)?) } else { None };
    // A resumed run continues with its own configuration, whatever else was passed.
    let config = checkpoint.as_ref().map_or(config, |c| TrainConfig { out_dir: run_dir.clone(), ..c.config.clone() });
    config.validate()?;
    let train_data = load_dataset(config.dataset, config.data_dir.as_deref(), Split::Train)?;
    let test_data = load_dataset(config.dataset, config.data_dir.as_deref(), Split::Test)?;
    let n = train_data.len();
    if config.lot_size > n {
        return Err(EngineError::invalid("lot size", format!("{} exceeds the {n} training examples", config.lot_size)));
    }
    let sample_rate = config.lot_size as f64 / n as f64;
    let planned_steps = config.planned_steps(n)?;
    let z = match &checkpoint {
        Some(c) => c.noise_multiplier,
        None => noise_multiplier(&config, sample_rate, planned_steps)?,
    };
    let planned_ledger = match z {
        Some(z) => PrivacyLedger::homogeneous(z, sample_rate, planned_steps)
            .map_err(|e| EngineError::Privacy(e.to_string()))?,
        None => PrivacyLedger::new(),
    };
    let planned_privacy = privacy(&config, &planned_ledger, planned_steps)?;
    let planned_sigma_privacy = sigma_privacy(&config, &planned_ledger)?;
    if let (Some(target), Some(eps)) = (config.target_epsilon, planned_privacy.epsilon)
        && eps > target * (1.0 + 1e-9)
    {
        return Err(EngineError::Privacy(format!(
            "the planned run would spend epsilon {eps}, above the budget {target}"
        )));
    }

    let spec = ModelSpec {
        name: config.model,
        activation: config.activation,
        hidden: config.hidden,
        normalization: config.normalization,
    };
    let mut init_rng = ChaChaState::new(config.seed, INIT_STREAM).restore();
    let mut model = build(spec, train_data.shape(), train_data.classes(), &mut init_rng, &device.device)?;
    let dev = &device.device;
    let (mut optimizer, mut sampler, mut noise, mut ledger, mut step, mut seconds, released) = match checkpoint {
        Some(c) => {
            let bad = || EngineError::Checkpoint {
                path: ckpt_path.clone(),
                reason: "parameters do not fit the model".into(),
            };
            let fits = c.params.iter().map(|(shape, _)| *shape).eq(model.params().iter().map(|p| p.dims()));
            let params = if fits { matrices_from_host(c.params, dev) } else { None };
            model.set_params(params.ok_or_else(bad)?);
            let released = match c.released {
                Some(r) => Some(matrices_from_host(r, dev).ok_or_else(bad)?),
                None => None,
            };
            (
                Optimizer::from_state(c.optimizer, dev)?,
                c.sampler,
                GaussianNoise::from_state(c.noise),
                c.ledger,
                c.step,
                c.seconds,
                released,
            )
        }
        None => {
            fs::create_dir_all(&run_dir)
                .map_err(|e| EngineError::Checkpoint { path: run_dir.clone(), reason: e.to_string() })?;
            let resolved = TrainConfig { noise_multiplier: z, target_epsilon: config.target_epsilon, ..config.clone() };
            let toml = toml::to_string(&resolved).map_err(|e| EngineError::invalid("config", e.to_string()))?;
            write_atomic(&run_dir.join("config.toml"), toml.as_bytes())?;
            let _ = fs::remove_file(run_dir.join("metrics.jsonl"));
            let sampling = match config.sampling {
                SamplingName::Poisson => Sampling::Poisson { rate: sample_rate },
                SamplingName::Shuffled => Sampling::Shuffled { lot_size: config.lot_size },
            };
            let sampler = LotSampler::new(sampling, n, config.seed).map_err(|e| EngineError::Data(e.to_string()))?;
            (
                Optimizer::new(optimizer_kind(&config))?,
                sampler,
                GaussianNoise::new(config.seed),
                PrivacyLedger::new(),
                0,
                0.0,
                None,
            )
        }
    };
    let notes = notes(&config);
    observe(&Event::Started {
        device: format!("{} ({})", device.backend, device.name),
        parameters: model.num_params(),
        train_examples: n,
        sample_rate,
        noise_multiplier: z,
        planned_steps,
        start_step: step,
        planned_privacy,
        planned_sigma_privacy,
        notes: notes.clone(),
    });

    let privatizer = match z {
        Some(_) => Privatizer::Gaussian {
            clip_norm: config.clip_norm,
            clipping: config.clipping(),
            expected_lot_size: sample_rate * n as f64,
            smoothing: config.smoothing()?,
        },
        None => Privatizer::None,
    };
    let layers = model.params().len() / 2;
    let mut allocation = z.map(|z| {
        NoiseAllocation::for_mechanism(
            config.mechanism,
            z,
            config.clip_norm,
            layers,
            config.sensitivity_every,
            released,
        )
    });
    let everyone: Vec<usize> = (0..n).collect();
    let batching = Batching::for_backend(config.batch_size, device.backend);
    let mut canaries = match (session.audit, &allocation) {
        (None, _) => None,
        (Some(request), Some(allocation)) => {
            // Placed on the noise of a step computed before any canary counts.
            let probe = allocation.clone().step_noise(step, &model.params(), &mut || {
                mean_gradient(&model, &train_data, &everyone, batching, dev)
            })?;
            let bound = config.clipping().layer_bound(config.clip_norm, layers);
            Some(WhiteBoxCanaries::for_run(
                request.canaries,
                sample_rate,
                config.seed,
                &probe.scales,
                &model.params(),
                bound,
            )?)
        }
        (Some(_), None) => {
            return Err(EngineError::invalid(
                "audit",
                "white-box canaries are scored on the noisy release: the mechanism none releases no noise",
            ));
        }
    };
    let steps_per_epoch = ((n as f64 / config.lot_size as f64).round() as u64).max(1);
    let log_every = (steps_per_epoch / 10).max(1);
    let metrics_path = run_dir.join("metrics.jsonl");
    let save = |model: &Model,
                optimizer: &Optimizer,
                sampler: &LotSampler,
                noise: &GaussianNoise,
                released: Option<Vec<HostMatrix>>,
                ledger: &PrivacyLedger,
                step: u64,
                seconds: f64| {
        Checkpoint {
            version: CHECKPOINT_VERSION,
            config: config.clone(),
            noise_multiplier: z,
            planned_steps,
            step,
            ledger: ledger.clone(),
            params: matrices_to_host(&model.params()),
            optimizer: optimizer.state(),
            sampler: sampler.clone(),
            noise: noise.state().clone(),
            released,
            seconds,
        }
        .save(&ckpt_path)
    };
    let mut segment = Instant::now();
    let stop_at = session.stop_after.map_or(planned_steps, |s| (step + s).min(planned_steps));
    while step < stop_at {
        let lot = sampler.next_lot();
        let step_noise = match allocation.as_mut() {
            Some(a) => Some(a.step_noise(step, &model.params(), &mut || {
                let w = mean_gradient(&model, &train_data, &everyone, batching, dev)?;
                Ok(match canaries.as_ref() {
                    Some(c) => c.add_to_mean(w, n),
                    None => w,
                })
            })?),
            None => None,
        };
        let draw =
            step_noise.as_ref().map(|s| StepDraw { noise: &mut noise, scales: &s.scales, canaries: canaries.as_mut() });
        let (grads, metrics) = lot_gradient(&model, &train_data, &lot, batching, privatizer, draw, dev)?;
        if let Some(a) = allocation.as_mut() {
            a.observe(&grads);
        }
        model.set_params(optimizer.step(config.learning_rate, model.params(), grads));
        if let Some(s) = &step_noise {
            ledger.record(s.noise_multiplier, sample_rate, 1).map_err(|e| EngineError::Privacy(e.to_string()))?;
        }
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
        let epoch_end = step % steps_per_epoch == 0 || step == planned_steps;
        if epoch_end {
            let event = Event::Evaluated {
                step,
                test_accuracy: evaluate(&model, &test_data, dev)?,
                privacy: privacy(&config, &ledger, planned_steps)?,
            };
            append_line(&metrics_path, &event)?;
            observe(&event);
        }
        if (config.checkpoint_every > 0 && step % config.checkpoint_every == 0) || step == stop_at {
            seconds += segment.elapsed().as_secs_f64();
            segment = Instant::now();
            let released = allocation.as_ref().and_then(NoiseAllocation::released);
            save(&model, &optimizer, &sampler, &noise, released, &ledger, step, seconds)?;
        }
    }
    let test_accuracy = evaluate(&model, &test_data, dev)?;
    let spent = privacy(&config, &ledger, planned_steps)?;
    let report = TrainReport {
        test_accuracy,
        epsilon: spent.epsilon,
        delta: spent.delta,
        accountant: spent.accountant,
        guarantee: spent.guarantee,
        sigma_privacy: sigma_privacy(&config, &ledger)?,
        steps: step,
        seconds,
        noise_multiplier: z,
        sample_rate,
        device: format!("{} ({})", device.backend, device.name),
        model: config.model.as_str().into(),
        mechanism: config.mechanism,
        seeded: config.seed.is_some(),
        notes,
        run_dir: run_dir.clone(),
        completed: step == planned_steps,
        audit: session.audit.zip(canaries.as_ref()).map(|(request, c)| c.audit(spent.delta, request.confidence)),
    };
    let json = serde_json::to_vec_pretty(&report).unwrap_or_default();
    write_atomic(&run_dir.join("report.json"), &json)?;
    Ok(report)
}
