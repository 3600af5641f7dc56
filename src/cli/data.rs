//! `dptrain data fetch`: downloads a dataset from where it is published, verified against its
//! published SHA-256 sums, into the cache where `dptrain train --dataset` finds it.
//! `dptrain data synth`: writes synthetic dead-leaves images as an image folder, to pretrain on
//! without public data.

use super::enum_arg::parse;
use super::progress::Progress;
use anyhow::Result;
use clap::{Args, Subcommand};
use dp_data::DatasetName;
use dptrain::fetch::download::Timeouts;
use dptrain::fetch::{Source, default_folder, fetch};
use std::path::PathBuf;
use std::time::Duration;

/// Datasets on disk.
#[derive(Args, Debug)]
pub struct DataArgs {
    #[command(subcommand)]
    command: DataCommand,
}

#[derive(Subcommand, Debug)]
enum DataCommand {
    /// Download mnist, fashion-mnist or cifar10 from where it is published (the URLs and
    /// SHA-256 sums TensorFlow Datasets records), verify every file, and keep it in the cache
    /// (DPTRAIN_CACHE_DIR, else $XDG_CACHE_HOME/dptrain, else ~/.cache/dptrain) or --dir.
    /// A file takes its name only once verified; an interrupted download resumes when the
    /// command is run again.
    ///
    /// Example: dptrain data fetch cifar10
    Fetch(FetchArgs),
    /// Write synthetic dead-leaves images (random discs and squares with power-law radii; 10
    /// classes, each a setting of the process) as an image folder DIR/train/cN/*.png and
    /// DIR/test/..., to pretrain a model on without any real data (so at no privacy cost) before
    /// DP fine-tuning: `dptrain train --dataset image-folder --data-dir DIR --image-shape 1x28x28
    /// --mechanism none`, then `--init-from` its model.safetensors.
    ///
    /// Example: dptrain data synth runs/leaves --per-class 2000 --shape 1x28x28
    Synth(SynthArgs),
}

#[derive(Args, Debug)]
struct SynthArgs {
    /// The folder to create.
    dir: PathBuf,

    /// Training images per class (the test split gets a tenth).
    #[arg(long, default_value_t = 1000)]
    per_class: usize,

    /// CxHxW of the images, C 1 (grey) or 3 (colour), H = W.
    #[arg(long, value_name = "CxHxW", default_value = "1x28x28", value_parser = super::train_flags::parse_shape)]
    shape: [usize; 3],

    /// Seed of the images (they are public: no secret is involved).
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[derive(Args, Debug)]
#[command(allow_negative_numbers = true)]
struct FetchArgs {
    /// mnist, fashion-mnist or cifar10.
    #[arg(value_parser = parse::<DatasetName>)]
    dataset: DatasetName,

    /// Folder to keep it in [default: the cache's datasets/NAME, where --dataset looks].
    #[arg(long)]
    dir: Option<PathBuf>,

    /// A mirror: the URL the file names are appended to, instead of the publisher's.
    #[arg(long, value_name = "URL")]
    mirror: Option<String>,

    /// Seconds a silent server is waited for (connecting, answering, or between two reads of
    /// the download): a slow but steady server is never cut.
    #[arg(long, default_value_t = 30.0)]
    timeout: f64,

    /// Seconds a whole file's transfer may take [default: no limit]; an interrupted transfer
    /// resumes where it stopped when the command is run again.
    #[arg(long, value_name = "SECONDS")]
    max_time: Option<f64>,
}

/// `value` seconds as a duration, refused unless in (0, 86400].
fn seconds(flag: &str, value: f64) -> Result<Duration> {
    if !(value.is_finite() && value > 0.0 && value <= 86_400.0) {
        anyhow::bail!("invalid {flag}: {value} (give seconds in (0, 86400])");
    }
    Ok(Duration::from_secs_f64(value))
}

/// Runs `dptrain data`.
pub fn run(args: DataArgs) -> Result<()> {
    match args.command {
        DataCommand::Fetch(args) => run_fetch(args),
        DataCommand::Synth(args) => run_synth(args),
    }
}

/// Runs `dptrain data synth`.
fn run_synth(args: SynthArgs) -> Result<()> {
    let [channels, height, width] = args.shape;
    if height != width {
        anyhow::bail!("--shape: the images are square (H = W), not {height}x{width}");
    }
    let progress = Progress::new(Some(0), "images");
    dptrain::synthetic::write_folder(&args.dir, args.per_class, [channels, width], args.seed, &mut |done, all| {
        progress.set_length(all);
        progress.set_position(done);
    })?;
    progress.finish();
    say!("written: {} ({} classes)", args.dir.display(), dptrain::synthetic::classes())?;
    Ok(())
}

/// Runs `dptrain data fetch`.
fn run_fetch(args: FetchArgs) -> Result<()> {
    if args.dataset.is_own() {
        return Err(dptrain::fetch::remote::own_data(args.dataset).into());
    }
    let Some(dir) = args.dir.clone().or_else(|| default_folder(args.dataset)) else {
        anyhow::bail!("no cache folder (set DPTRAIN_CACHE_DIR or HOME), and no --dir");
    };
    let timeouts = Timeouts {
        idle: seconds("--timeout", args.timeout)?,
        total: args.max_time.map(|t| seconds("--max-time", t)).transpose()?,
    };
    let source = Source { mirror: args.mirror.clone(), timeouts };
    let progress = Progress::new(Some(0), "bytes");
    let downloaded = fetch(args.dataset, &dir, &source, &mut |name, done, all| {
        progress.set_length(all);
        progress.set_message(name.to_string());
        progress.set_position(done);
    })?;
    progress.finish();
    let what = if downloaded { "fetched and verified" } else { "already there, verified" };
    say!("{what}: {}", dir.display())?;
    Ok(())
}
