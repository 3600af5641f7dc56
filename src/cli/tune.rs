//! `dptrain tune`: a hyper-parameter search whose privacy is accounted.

use super::progress::Progress;
use anyhow::{Context, Result, bail};
use clap::Args;
use dp_data::safe_files::read_following;
use dp_engine::DeviceChoice;
use dp_run::folder::MAX_CONFIG;
use dp_run::{Event, interrupt};
use dptrain::search_space::{SpaceFile, configurations};
use dptrain::trainer::Told;
use dptrain::tune::{Tune, TuneReport, repetitions, tune};
use std::path::PathBuf;

/// Search hyper-parameters on the private data with the whole search's privacy accounted
/// (Papernot & Steinke, ICLR 2022): a random number K of candidates (drawn by the engine's
/// CSPRNG), each a `dptrain train` run of a configuration drawn at random from the space, scored
/// by a noisy count of correct predictions on held-out training examples; only the best is
/// released (its configuration, noisy score, model in OUT/chosen, and its test accuracy) with
/// the epsilon of the whole search, certified by the RDP accountant. Every candidate's noise is
/// calibrated so that the search meets --target-epsilon.
///
/// K, the other candidates and their scores are the mechanism's internal state: they live in
/// OUT/search-state (owner-only, sealed) while the search runs and are removed when it
/// completes; publishing them voids the bound, so nothing here prints them. Ctrl-C stops the
/// search with the candidate in training checkpointed; `--resume` continues it (same --space
/// and settings): K is not drawn again, no finished candidate trains again, and a state edited
/// since is refused.
///
/// The space file: `[base]` holds `dptrain train` settings (keys as in --config; `validation =
/// N` is required), `[space]` a list of values for any setting, or a range drawn for each
/// candidate (`scale` linear or log; integers when both bounds are) for a setting that does
/// not change the training's lot size or steps, e.g.
///   [base]
///   model = "scatnet-linear"
///   validation = 5000
///   [space]
///   learning_rate = { low = 2.0, high = 16.0, scale = "log" }
///   lot_size = [4096, 8192]
///
/// Example:
///   dptrain tune --space space.toml --target-epsilon 3 --out-dir runs/tune
#[derive(Args, Debug)]
pub struct TuneArgs {
    /// The search space (TOML: [base] and [space]).
    #[arg(long, value_name = "FILE")]
    space: PathBuf,

    /// The epsilon of the whole search.
    #[arg(long, value_name = "EPS")]
    target_epsilon: f64,

    /// The search's delta.
    #[arg(long, default_value_t = 1e-5)]
    delta: f64,

    /// The mean number of candidates K.
    #[arg(long, default_value_t = 5.0, value_name = "MEAN")]
    candidates: f64,

    /// How K is drawn: geometric, logarithmic, tnb:ETA (truncated negative binomial of shape
    /// ETA) or poisson (K = 0 possible: then nothing is released).
    #[arg(long, default_value = "geometric")]
    distribution: String,

    /// Standard deviation of the noise on each candidate's count of correct held-out predictions.
    #[arg(long, default_value_t = 20.0, value_name = "SIGMA")]
    score_noise: f64,

    /// Device for every candidate.
    #[arg(long, default_value = "auto", value_parser = super::enum_arg::parse::<DeviceChoice>)]
    device: DeviceChoice,

    /// The search's folder.
    #[arg(long, default_value = "runs/tune")]
    out_dir: PathBuf,

    /// Replace another search in --out-dir (an interrupted search's spent budget is then lost).
    #[arg(long, conflicts_with = "resume")]
    overwrite: bool,

    /// Continue the interrupted search in --out-dir (give the --space and settings it was
    /// started with).
    #[arg(long)]
    resume: bool,

    /// Keep OUT/search-state when the search completes (K, every candidate's model, score and
    /// keys), owner-only: for debugging; publishing any of it voids the search's bound.
    #[arg(long)]
    keep_state: bool,

    /// Seed a reproducible search (its draws are then only as secret as the seed).
    #[arg(long)]
    seed: Option<u64>,

    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `dptrain tune`.
pub fn run(args: TuneArgs) -> Result<()> {
    let bytes = read_following(&args.space, MAX_CONFIG)?;
    let text = String::from_utf8(bytes).with_context(|| format!("{}: not UTF-8 text", args.space.display()))?;
    let file: SpaceFile =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {}", args.space.display(), e.message()))?;
    let search = Tune {
        space: configurations(&file)?,
        repetitions: repetitions(&args.distribution, args.candidates)?,
        target_epsilon: args.target_epsilon,
        delta: args.delta,
        score_noise: args.score_noise,
        seed: args.seed,
        out_dir: args.out_dir.clone(),
        overwrite: args.overwrite,
        resume: args.resume,
        keep_state: args.keep_state,
        interrupt: Some(interrupt::install()),
    };
    let device = super::device::open(args.device)?;
    // Only the time: the candidates' count and scores are not shown (they would reveal K). The
    // message appears once the first candidate starts: a refusal before it is one line.
    let progress = Progress::new(None, "");
    let mut started = false;
    let report = tune(&search, &device, &mut |told| match told {
        Told::Scattering { examples, .. } => {
            progress.set_message(format!("searching (computing the ScatterNet features of {examples} examples)"))
        }
        Told::Run(Event::Started { .. }) if !started => {
            started = true;
            progress.set_message("searching (candidates are not shown: K is secret)".to_string());
        }
        Told::Run(_) => {}
    })?;
    progress.finish();
    if args.keep_state {
        eprintln!(
            "warning: {} is kept (--keep-state): it holds K and every candidate; publishing any of it voids the search's bound",
            args.out_dir.join(dptrain::search_folder::STATE_DIR).display()
        );
    }
    print(&report, args.json)?;
    if !args.json {
        say!("search report: {}", args.out_dir.join("report.json").display())?;
    }
    Ok(())
}

/// Prints the search's release.
fn print(r: &TuneReport, json: bool) -> Result<()> {
    if json {
        say!("{}", serde_json::to_string(r)?)?;
        return Ok(());
    }
    let Some(chosen) = &r.chosen else {
        bail!("the search drew no candidate (Poisson K = 0): nothing is released; it spent {}", r.privacy);
    };
    say!(
        "chosen: learning rate {}, lot size {}, epochs {}, clip norm {}, momentum {} | validation score {:.2}% (noisy) | test accuracy {:.2}% | {}",
        chosen.learning_rate,
        chosen.lot_size,
        chosen.epochs,
        chosen.clip_norm,
        chosen.momentum,
        r.validation_score.unwrap_or(0.0) * 100.0,
        r.test_accuracy.unwrap_or(0.0) * 100.0,
        r.privacy
    )?;
    for note in &r.notes {
        say!("note: {note}")?;
    }
    say!("model: {}", r.run_dir.as_ref().map_or("-".into(), |d| d.display().to_string()))?;
    Ok(())
}
