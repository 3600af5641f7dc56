//! `dptrain train`: a DP training run with its privacy accounted at every step.

use super::enum_arg::parse;
use super::progress::Progress;
use anyhow::{Context, Result, bail};
use clap::Args;
use dp_accounting::LotSampling;
use dp_data::DatasetName;
use dp_data::safe_files::{occupied, read_following, read_regular};
use dp_engine::DeviceChoice;
use dp_engine::nn::activation::Activation;
use dp_engine::optim::LrSchedule;
use dp_engine::optim::OptimizerName;
use dp_engine::privacy::AccountantName;
use dp_engine::privacy::Clipping;
use dp_engine::privacy::mechanism::MechanismName;
use dp_engine::privacy::mechanism::smoothing::SmoothingScope;
use dp_engine::step::canaries::AuditRequest;
use dp_run::checkpoint::checkpoint_path;
use dp_run::folder::keys::KEY_FILE;
use dp_run::folder::{CONFIG_FILE, MAX_CONFIG, MODEL_FILE};
use dp_run::{Event, RunOptions, RunReport, interrupt};
use dptrain::train_config::TrainConfig;
use dptrain::trainer::{Session, Told, train};
use dptrain::zoo::ModelName;
use dptrain::zoo::Normalization;
use std::path::{Path, PathBuf};

/// Train a model with differential privacy (DP-SGD / DP-Adam) and report its accuracy and the
/// epsilon it spent, with the guarantee label.
///
/// Values come from the defaults, then the --config TOML file (keys are the flag names with
/// underscores: lot_size = 256), then the flags. The run folder (--out-dir) receives config.toml
/// (the settings), metrics.jsonl, checkpoint.bin (model and optimiser as Burn records, with the
/// ledger and the positions of the sampler and noise streams, sealed by a MAC), report.json, and
/// run.key (owner-only: the streams' and the MAC's keys, and the seed; removed when the run
/// completes unless --keep-key). One process at a time runs in a folder (it holds its lock).
///
/// Example (Fashion-MNIST from Debian's dataset-fashion-mnist package, epsilon 3):
///   dptrain train --model mnist-cnn --epochs 1 --target-epsilon 3 --delta 1e-5
#[derive(Args, Debug)]
#[command(allow_negative_numbers = true)]
pub struct TrainArgs {
    /// TOML file with any of the settings below.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Continue the run in --out-dir from its checkpoint, with its own settings and ledger.
    #[arg(long)]
    resume: bool,

    /// Start a fresh run in an --out-dir that holds another run, deleting that run's files.
    #[arg(long, conflicts_with = "resume")]
    overwrite: bool,

    /// Take at most this many steps now, then checkpoint and exit (continue with --resume).
    #[arg(long, value_name = "STEPS")]
    stop_after: Option<u64>,

    /// Keep the run folder's key file (run.key) when the run completes. It holds the keys of the
    /// run's noise and sampling streams and of its checkpoints' MAC: whoever reads it can
    /// regenerate the noise and undo the run's privacy. Removed by default.
    #[arg(long)]
    keep_key: bool,

    /// Print the final report as one JSON object on stdout.
    #[arg(long)]
    json: bool,

    /// Audit this run (one-run audit of Steinke, Nasr and Jagielski 2023): add this many
    /// white-box gradient canaries, each in the training set with probability 1/2, placed on the
    /// coordinates where the mechanism's noise is smallest, and report an empirical lower bound
    /// on the run's epsilon. The canaries change the model a little; audit a copy of a run, not
    /// the model you release. Whole runs only (no --resume or --stop-after).
    #[arg(long, value_name = "M")]
    audit_canaries: Option<usize>,

    /// Confidence of the audit's lower bound.
    #[arg(long, default_value_t = 0.95, requires = "audit_canaries")]
    audit_confidence: f64,

    /// Dataset: fashion-mnist, mnist or cifar10; or your own, in --data-dir: image-folder
    /// (DIR/train/CLASS/*.png or .jpg, one folder per class, and DIR/test/CLASS/... or
    /// --validation N; resized to --image-shape) or csv (DIR/train.csv, and DIR/test.csv or
    /// --validation N; numeric features as they are, the label column --label, the classes
    /// declared with --classes; a missing
    /// value or a text column is refused: nothing is computed from the private rows)
    /// [default: fashion-mnist].
    #[arg(long, value_parser = parse::<DatasetName>)]
    dataset: Option<DatasetName>,

    /// Folder with the dataset's files [default for fashion-mnist: /usr/share/datasets/fashion-mnist].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,

    /// image-folder: CxHxW the images are resized to, C 1 (grey) or 3 (RGB) [default: 3x32x32].
    #[arg(long, value_name = "CxHxW", value_parser = parse_shape)]
    image_shape: Option<[usize; 3]>,

    /// csv: the label column, a header name or a 0-based index [default: the last column].
    #[arg(long, value_name = "COLUMN")]
    label: Option<String>,

    /// csv: the classes, in label order, as the labels are written (required: they are public
    /// input, never read from the private rows; a row labelled otherwise is refused).
    #[arg(long, value_name = "NAME,NAME,...", value_delimiter = ',')]
    classes: Option<Vec<String>>,

    /// Model: mnist-cnn, xiang-mnist, cifar10-cnn, logreg, mlp, wrn-16-4 (residual, GroupNorm,
    /// weight-standardised convolutions; use --activation relu), or scatnet-linear / scatnet-cnn
    /// (Tramèr & Boneh's heads on ScatterNet features, computed once and cached in
    /// DPTRAIN_CACHE_DIR, else ~/.cache/dptrain) [default: mnist-cnn].
    #[arg(long, value_parser = parse::<ModelName>)]
    model: Option<ModelName>,

    /// Activation: tanh (tempered sigmoid, best under DP) or relu [default: tanh].
    #[arg(long, value_parser = parse::<Activation>)]
    activation: Option<Activation>,

    /// Hidden width of the mlp model [default: the input width].
    #[arg(long)]
    hidden: Option<usize>,

    /// Evaluate an exponential moving average of the parameters with this decay (e.g. 0.999)
    /// instead of the last iterate, with De et al.'s warm-up min(decay, (1 + t) / (10 + t)).
    /// Post-processing of the released models: the same epsilon. Kept in checkpoints.
    #[arg(long, value_name = "DECAY")]
    ema: Option<f64>,

    /// Augmentation multiplicity (De et al. 2022): train on K augmented views of every example
    /// of each lot (a random crop after reflect padding, mirrored at random: see
    /// --augment-padding and --augment-mirror), its gradient averaged over its views before it
    /// is clipped.
    /// Each example still moves the sum by at most C: the same epsilon, K times the compute
    /// (--batch-size then counts views). Off by default.
    #[arg(long, value_name = "K")]
    augmult: Option<usize>,

    /// Pixels of reflect padding before each view's random crop (0: no shift) [default: 4].
    #[arg(long, value_name = "PIXELS")]
    augment_padding: Option<usize>,

    /// Mirror views at random: true or false [default: true on fashion-mnist and cifar10, false
    /// on mnist, whose digits a mirror changes].
    #[arg(long, value_name = "BOOL")]
    augment_mirror: Option<bool>,

    /// Hold the last N training examples out: train on the others and evaluate on these instead
    /// of the test set, to choose hyper-parameters without looking at the test set. The held-out
    /// examples are never trained on; what the evaluation reveals about them is not accounted
    /// (as in the papers' searches).
    #[arg(long, value_name = "N")]
    validation: Option<usize>,

    /// Start from the weights in FILE (safetensors: another run's model.safetensors, or a
    /// PyTorch state dict saved with `safetensors.torch.save_file`) instead of a random
    /// initialisation, for DP fine-tuning. The file is treated as public: weights trained on the
    /// private data would make the printed epsilon meaningless. Its tensors must be exactly the
    /// model's, by name and shape (a mismatch names the tensor).
    #[arg(long, value_name = "FILE")]
    init_from: Option<PathBuf>,

    /// Keep the parameters whose name matches the regular expression PATTERN fixed (repeat for
    /// more), as a pretrained model's feature layers are while its head is fine-tuned: they get
    /// no gradient, no noise and no update, and the report lists the trained and frozen ones.
    /// Names are those of model.safetensors (`convs.0.weight`, `dense.1.bias`); a pattern
    /// matches anywhere in a name (anchor it with ^ and $), and must freeze all of a layer's
    /// parameters or none. E.g. `--freeze '^convs\.'` trains the dense layers only.
    #[arg(long, value_name = "PATTERN")]
    freeze: Vec<String>,

    /// Normalisation layers: none, or batch (refused: BatchNorm has no DP version; use GroupNorm).
    #[arg(long, value_parser = parse::<Normalization>)]
    normalization: Option<Normalization>,

    /// Device: auto (an NVIDIA GPU through CUDA in a build with `--features cuda`, else a real GPU
    /// through wgpu if present, else cpu), cpu (Burn's flex backend),
    /// ndarray (Burn's deprecated ndarray backend, the tests' reference), wgpu, or cuda (an
    /// NVIDIA GPU, in a build with `--features cuda`).
    #[arg(long, value_parser = parse::<DeviceChoice>)]
    device: Option<DeviceChoice>,

    /// Mechanism: gaussian (DP-SGD/DP-Adam), ls-sgd / ls-adam (DP-LSSGD / DP-LSAdam: the noisy
    /// gradient Laplacian-smoothed, same epsilon), optimized (Xiang et al.'s mechanism made sound: per-layer
    /// clipping and a sigma per layer, certified), optimized-paper (Xiang et al.'s Algorithm 1 as
    /// written: the paper's epsilon, paper-bound, beside the certified reading of its sigma, none)
    /// or none (the unperturbed baseline, no privacy) [default: gaussian].
    #[arg(long, value_parser = parse::<MechanismName>)]
    mechanism: Option<MechanismName>,

    /// Passes over the training data [default: 1].
    #[arg(long)]
    epochs: Option<f64>,

    /// Expected examples per lot (one noisy step); the sampling rate is lot-size / N [default: 256].
    #[arg(long)]
    lot_size: Option<usize>,

    /// Examples per physical batch: bounds memory, does not change the result [default: 256].
    #[arg(long)]
    batch_size: Option<usize>,

    /// Lot sampling: poisson (what the accountant assumes) or shuffled (not covered: label none).
    #[arg(long, value_parser = parse::<LotSampling>)]
    sampling: Option<LotSampling>,

    /// Noise standard deviation divided by the clipping norm.
    #[arg(long, short = 'z', conflicts_with = "target_epsilon")]
    noise_multiplier: Option<f64>,

    /// Calibrate the noise multiplier so that the whole run spends exactly this epsilon.
    #[arg(long)]
    target_epsilon: Option<f64>,

    /// Delta of the (epsilon, delta) guarantee; keep it below 1/N [default: 1e-5].
    #[arg(long)]
    delta: Option<f64>,

    /// Per-example gradient clipping bound C [default: 1].
    #[arg(long)]
    clip_norm: Option<f64>,

    /// Clipping: flat (whole gradient) or per-layer (C / sqrt(layers) per layer) [default:
    /// per-layer for optimized, else flat].
    #[arg(long, value_parser = parse::<Clipping>)]
    clipping: Option<Clipping>,

    /// optimized-paper: recompute the model sensitivity w (the full-data gradient, one pass over
    /// the training set) every this many lots; the paper does it every lot [default: 1].
    #[arg(long, value_name = "LOTS")]
    sensitivity_every: Option<u64>,

    /// Laplacian smoothing parameter s of ls-sgd / ls-adam; 0 is plain DP-SGD [default: 1].
    #[arg(long)]
    ls_sigma: Option<f64>,

    /// What ls-sgd / ls-adam smooth: tensor (each parameter tensor, as the authors' code) or model
    /// (all parameters as one vector) [default: tensor].
    #[arg(long, value_parser = parse::<SmoothingScope>)]
    ls_scope: Option<SmoothingScope>,

    /// Optimizer (burn-optim): sgd, adam or adamw [default: adam for ls-adam, else sgd].
    #[arg(long, value_parser = parse::<OptimizerName>)]
    optimizer: Option<OptimizerName>,

    /// Learning rate [default: 0.5].
    #[arg(long)]
    learning_rate: Option<f64>,

    /// Learning-rate schedule: constant, or cosine (decays from --learning-rate to zero over the
    /// run's steps; post-processing, the same epsilon) [default: constant].
    #[arg(long, value_parser = parse::<LrSchedule>)]
    lr_schedule: Option<LrSchedule>,

    /// SGD momentum, PyTorch's convention (no dampening) [default: 0].
    #[arg(long)]
    momentum: Option<f64>,

    /// Weight decay: an L2 term for sgd and adam, decoupled for adamw [default: 0].
    #[arg(long)]
    weight_decay: Option<f64>,

    /// Accountant: rdp (as Opacus/TF Privacy), prv (tight upper bound) or analytic (full batches
    /// only) [default: rdp].
    #[arg(long, value_parser = parse::<AccountantName>)]
    accountant: Option<AccountantName>,

    /// Seed for a reproducible run (sampling, noise, initialisation). Without it every random
    /// stream is keyed from the OS; with it the guarantee holds only while the seed is secret.
    #[arg(long)]
    seed: Option<u64>,

    /// Checkpoint every this many steps (0: only at the end) [default: 200].
    #[arg(long)]
    checkpoint_every: Option<u64>,

    /// Run folder [default: runs/latest].
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

/// Lays each flag given over the configuration's field of the same name: the value itself, or
/// (`optional`) the flag's `Some` for a field that is an `Option` too.
macro_rules! overlay {
    ($config:ident, $args:ident, $($field:ident),*) => {
        $(if let Some(v) = $args.$field.clone() { $config.$field = v; })*
    };
    (optional $config:ident, $args:ident, $($field:ident),*) => {
        $(if $args.$field.is_some() { $config.$field = $args.$field.clone(); })*
    };
}

/// `CxHxW` as three sizes.
pub(super) fn parse_shape(s: &str) -> std::result::Result<[usize; 3], String> {
    let sizes: Vec<usize> =
        s.split('x').map(str::parse).collect::<std::result::Result<_, _>>().map_err(|e| format!("{s}: {e}"))?;
    <[usize; 3]>::try_from(sizes).map_err(|_| format!("{s}: give channels, height and width as CxHxW, e.g. 3x32x32"))
}

/// `text`, the TOML file `path`, parsed; an error names the file.
fn parse_toml<T: serde::de::DeserializeOwned>(text: &str, path: &Path) -> Result<T> {
    toml::from_str(text).map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.message()))
}

impl TrainArgs {
    /// Defaults, then the config file, then the flags.
    fn resolve(&self) -> Result<TrainConfig> {
        let config = match &self.config {
            Some(path) => {
                // A link is followed (a config kept elsewhere), but only to a regular file of a
                // config's size: a FIFO or /dev/zero is one line, not a hang.
                let bytes = read_following(path, MAX_CONFIG)?;
                let text = String::from_utf8(bytes).with_context(|| format!("{}: not UTF-8 text", path.display()))?;
                parse_toml(&text, path)?
            }
            None => TrainConfig::default(),
        };
        self.overlay(config)
    }

    /// The settings of the run being resumed (its config.toml), refused when a flag given would
    /// change one of them (the same command with --resume added is fine; --device may differ).
    fn resume_config(&self) -> Result<TrainConfig> {
        if self.config.is_some() {
            bail!("--resume continues the run with its own config.toml: drop --config");
        }
        let out_dir = self.out_dir.clone().unwrap_or_else(|| TrainConfig::default().out_dir);
        let path = out_dir.join(CONFIG_FILE);
        if !occupied(&path) {
            bail!("--resume: no run in {} (give the run's --out-dir)", out_dir.display());
        }
        // Bounded, without following a link or blocking on a FIFO: the folder may be hostile.
        let bytes = read_regular(&path, MAX_CONFIG)?;
        let text = String::from_utf8(bytes).with_context(|| format!("{}: not UTF-8 text", path.display()))?;
        let run: TrainConfig = parse_toml(&text, &path)?;
        let asked = self.overlay(run.clone())?;
        // The seed is not in config.toml but in the key file: the trainer checks a given one.
        let table = |c: &TrainConfig| -> Result<toml::Table> {
            let c = TrainConfig { device: run.device, seed: None, out_dir: out_dir.clone(), ..c.clone() };
            Ok(toml::Table::try_from(c)?)
        };
        let (was, now) = (table(&run)?, table(&asked)?);
        let changed: Vec<String> = now
            .iter()
            .filter(|(k, v)| was.get(*k) != Some(*v))
            .map(|(k, v)| {
                format!(
                    "--{} (the run has {}, given {v})",
                    k.replace('_', "-"),
                    was.get(k).map_or("none".into(), ToString::to_string)
                )
            })
            .collect();
        let dropped: Vec<String> =
            was.keys().filter(|k| !now.contains_key(*k)).map(|k| format!("--{}", k.replace('_', "-"))).collect();
        if !changed.is_empty() || !dropped.is_empty() {
            bail!(
                "--resume continues the run as its config.toml says; these flags would change it: {}",
                [changed, dropped].concat().join(", ")
            );
        }
        Ok(TrainConfig { device: asked.device, seed: asked.seed, out_dir, ..run })
    }

    /// `config` with the flags given laid over it; a mechanism's own option goes with the
    /// file's keys, which the mechanism named checks (it refuses the options of another).
    fn overlay(&self, mut config: TrainConfig) -> Result<TrainConfig> {
        let args = self;
        overlay!(
            config,
            args,
            dataset,
            model,
            activation,
            normalization,
            device,
            mechanism,
            epochs,
            lot_size,
            batch_size,
            sampling,
            delta,
            clip_norm,
            learning_rate,
            lr_schedule,
            momentum,
            weight_decay,
            accountant,
            checkpoint_every,
            out_dir
        );
        overlay!(
            optional config,
            args,
            data_dir,
            image_shape,
            label,
            classes,
            optimizer,
            clipping,
            hidden,
            validation,
            ema,
            augmult,
            augment_padding,
            augment_mirror,
            init_from,
            seed
        );
        if !self.freeze.is_empty() {
            config.freeze.clone_from(&self.freeze);
        }
        if self.noise_multiplier.is_some() {
            (config.noise_multiplier, config.target_epsilon) = (self.noise_multiplier, None);
        }
        if self.target_epsilon.is_some() {
            (config.noise_multiplier, config.target_epsilon) = (None, self.target_epsilon);
        }
        self.mechanism_options(&mut config)?;
        config.privacy()?;
        Ok(config)
    }

    /// The mechanisms' own options given as flags, added to `config`'s.
    fn mechanism_options(&self, config: &mut TrainConfig) -> Result<()> {
        let options = [
            ("sensitivity_every", self.sensitivity_every.map(toml::Value::try_from)),
            ("ls_sigma", self.ls_sigma.map(toml::Value::try_from)),
            ("ls_scope", self.ls_scope.map(toml::Value::try_from)),
        ];
        for (key, value) in options {
            if let Some(value) = value {
                config.mechanism_options.insert(key.into(), value?);
            }
        }
        Ok(())
    }
}

/// What `dptrain train` shows of a run: its set-up as notes above the progress bar, each step
/// on the bar, the metrics in its status, each evaluation as a note.
struct Shown<'a> {
    progress: &'a Progress,
    evaluated_on: &'static str,
    last_privacy: String,
}

impl Shown<'_> {
    /// Shows `told`.
    fn show(&mut self, told: Told<'_>) {
        let progress = self.progress;
        match told {
            Told::Run(started @ Event::Started { .. }) => self.started(started),
            Told::Scattering { examples, cache } => {
                let kept = cache.map_or("not cached: no cache folder".into(), |c| format!("cached in {}", c.display()));
                progress.note(format!("computing the ScatterNet features of {examples} examples ({kept})"));
            }
            Told::Run(Event::Progress { step }) => progress.set_position(*step),
            Told::Run(Event::Step { loss, accuracy, .. }) => {
                let accuracy = accuracy.map_or(String::new(), |a| format!(" train acc {:.1}%", a * 100.0));
                progress.set_status(format!("loss {loss:.3}{accuracy} {}", self.last_privacy));
            }
            Told::Run(evaluated @ Event::Evaluated { privacy, .. }) => {
                self.last_privacy = privacy.to_string();
                evaluated.evaluated_line(self.evaluated_on).into_iter().for_each(|line| progress.note(line));
            }
        }
    }

    /// Shows the run's set-up and sets the bar to its planned steps.
    fn started(&self, event: &Event) {
        let Event::Started { planned_steps, start_step, .. } = event else {
            return;
        };
        event.setup_lines().into_iter().for_each(|line| self.progress.note(line));
        self.progress.set_length(*planned_steps);
        self.progress.set_position(*start_step);
    }
}

/// Runs `dptrain train`.
pub fn run(args: TrainArgs) -> Result<()> {
    let config = if args.resume { args.resume_config()? } else { args.resolve()? };
    if args.resume && !checkpoint_path(&config.out_dir).exists() {
        bail!(
            "--resume: no checkpoint in {}: the run there stopped before its first checkpoint, so it took no step and spent nothing; start it again without --resume (or give the run's --out-dir)",
            config.out_dir.display()
        );
    }
    let device = super::device::open(config.device)?;
    let progress = Progress::new(Some(0), "steps");
    let mut shown = Shown { progress: &progress, evaluated_on: config.evaluated_on(), last_privacy: String::new() };
    let audit = args.audit_canaries.map(|canaries| AuditRequest { canaries, confidence: args.audit_confidence });
    let options = RunOptions {
        stop_after: args.stop_after,
        audit,
        overwrite: args.overwrite,
        interrupt: Some(interrupt::install()),
        keep_key: args.keep_key,
        ..RunOptions::default()
    };
    let session = Session { resume: args.resume, options };
    let report = train(config, session, &device, &mut |told| shown.show(told))?;
    progress.finish();
    print_report(&report, args.json)?;
    if report.completed && args.keep_key {
        eprintln!(
            "warning: {} is kept (--keep-key) beside {}: never publish it with the model (whoever holds it can regenerate the run's noise)",
            report.run_dir.join(KEY_FILE).display(),
            report.run_dir.join(MODEL_FILE).display()
        );
    }
    if report.interrupted {
        bail!(
            "interrupted at step {}: the checkpoint is written; continue with --resume --out-dir {}",
            report.steps,
            report.run_dir.display()
        );
    }
    Ok(())
}

/// Prints the report: one line, or its JSON with `json`.
fn print_report(r: &RunReport, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
        return Ok(());
    }
    println!(
        "{} accuracy {:.2}% | {} | {} steps in {:.1} s on {}",
        r.evaluated_on,
        r.test_accuracy * 100.0,
        r.privacy,
        r.steps,
        r.seconds,
        r.device
    );
    if let Some(p) = &r.sigma_privacy {
        println!("privacy of the smallest sigma actually used: {}", p);
    }
    if let Some(a) = &r.audit {
        println!(
            "audit: epsilon >= {:.3} (empirical, {}% confidence; {} of {} guesses right on {} white-box canaries)",
            a.bound.epsilon,
            a.confidence * 100.0,
            a.bound.correct,
            a.bound.guesses,
            a.bound.canaries
        );
    }
    println!("run folder: {} (curves: {})", r.run_dir.display(), r.curves.display());
    if !r.completed && !r.interrupted {
        println!("stopped before the planned steps: continue with --resume --out-dir {}", r.run_dir.display());
    }
    Ok(())
}
