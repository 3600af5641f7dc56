//! `dptrain train`: a DP training run with its privacy accounted at every step.

use super::progress::Progress;
use super::train_flags::SettingFlags;
use anyhow::{Context, Result, bail};
use clap::Args;
use dp_data::safe_files::{occupied, read_following, read_regular};
use dp_engine::step::canaries::AuditRequest;
use dp_run::folder::checkpoint::checkpoint_path;
use dp_run::folder::keys::KEY_FILE;
use dp_run::folder::{CONFIG_FILE, MAX_CONFIG, MODEL_FILE};
use dp_run::{Event, RunOptions, RunReport, interrupt};
use dptrain::train_config::TrainConfig;
use dptrain::trainer::{Session, Told, train};
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

    #[command(flatten)]
    settings: SettingFlags,
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
        Ok(config.overlaid(&self.settings.given()?)?)
    }

    /// The settings of the run being resumed (its config.toml), refused when a flag given would
    /// change one of them (the same command with --resume added is fine; --device may differ).
    fn resume_config(&self) -> Result<TrainConfig> {
        if self.config.is_some() {
            bail!("--resume continues the run with its own config.toml: drop --config");
        }
        let out_dir = self.settings.out_dir.clone().unwrap_or_else(|| TrainConfig::default().out_dir);
        let path = out_dir.join(CONFIG_FILE);
        if !occupied(&path) {
            bail!("--resume: no run in {} (give the run's --out-dir)", out_dir.display());
        }
        // Bounded, without following a link or blocking on a FIFO: the folder may be hostile.
        let bytes = read_regular(&path, MAX_CONFIG)?;
        let text = String::from_utf8(bytes).with_context(|| format!("{}: not UTF-8 text", path.display()))?;
        let run: TrainConfig = parse_toml(&text, &path)?;
        let asked = run.overlaid(&self.settings.given()?)?;
        let changes: Vec<String> = run
            .changes(&asked)?
            .iter()
            .map(|change| match &change.given {
                Some(given) => format!("--{} (the run has {}, given {given})", flag(&change.key), change.run_has),
                None => format!("--{}", flag(&change.key)),
            })
            .collect();
        if !changes.is_empty() {
            bail!(
                "--resume continues the run as its config.toml says; these flags would change it: {}",
                changes.join(", ")
            );
        }
        Ok(TrainConfig { device: asked.device, seed: asked.seed, out_dir, ..run })
    }
}

/// The flag of a configuration key.
fn flag(key: &str) -> String {
    key.replace('_', "-")
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
        say!("{}", serde_json::to_string(r)?)?;
        return Ok(());
    }
    say!(
        "{} accuracy {:.2}% | {} | {} steps in {:.1} s on {}",
        r.evaluated_on,
        r.test_accuracy * 100.0,
        r.privacy,
        r.steps,
        r.seconds,
        r.device
    )?;
    if let Some(p) = &r.sigma_privacy {
        say!("privacy of the smallest sigma actually used: {}", p)?;
    }
    if let Some(a) = &r.audit {
        say!(
            "audit: epsilon >= {:.3} (empirical, {}% confidence; {} of {} guesses right on {} white-box canaries)",
            a.bound.epsilon,
            a.confidence * 100.0,
            a.bound.correct,
            a.bound.guesses,
            a.bound.canaries
        )?;
    }
    if let Some(initial) = &r.initial_weights {
        say!("note: {}", initial.note())?;
    }
    say!("run folder: {} (curves: {})", r.run_dir.display(), r.curves.display())?;
    if !r.completed && !r.interrupted {
        say!("stopped before the planned steps: continue with --resume --out-dir {}", r.run_dir.display())?;
    }
    Ok(())
}
