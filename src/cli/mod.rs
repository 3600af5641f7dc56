//! Command-line parsing and dispatch. Every failure ends as one line on stderr and a non-zero exit.

/// `println!` that returns an error instead of panicking where standard output cannot be
/// written (`> /dev/full`, a full disk): the command then ends in one line on stderr.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*).map_err($crate::cli::stdout_error)
    }};
}

/// `print!` as [`say!`] is `println!`.
macro_rules! put {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*).map_err($crate::cli::stdout_error)
    }};
}

mod account;
mod accountant_args;
mod audit;
mod bandmf;
mod bench;
mod calibrate;
mod data;
mod device;
mod enum_arg;
mod erm;
mod export;
mod output;
mod plot;
mod progress;
mod schedule;
mod selftest;
mod table_args;
mod train;
mod train_flags;
mod tune;
mod words;

use clap::{Parser, Subcommand};
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::LazyLock;

/// The version and the devices this build can run on (`dptrain --version`): ndarray, wgpu and
/// CUDA only in a build with their features.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    let built = [
        ("cpu", true),
        ("ndarray", cfg!(feature = "ndarray")),
        ("wgpu", cfg!(feature = "wgpu")),
        ("cuda", cfg!(feature = "cuda")),
    ];
    let devices: Vec<&str> = built.iter().filter(|(_, on)| *on).map(|(name, _)| *name).collect();
    format!("{} (devices: {})", env!("CARGO_PKG_VERSION"), devices.join(", "))
});

/// Differentially private training with honest privacy accounting.
///
/// Every epsilon dptrain prints carries a guarantee label: `certified` (a sound proof for this
/// exact algorithm, computed by a sound accountant), `paper-bound` (a paper's own formula, with
/// unspecified constants or heuristic steps) or `none`.
#[derive(Parser)]
#[command(name = "dptrain", version = VERSION.as_str(), about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Epsilon spent by DP-SGD with a given noise multiplier, sampling rate and number of steps.
    Account(account::AccountArgs),
    /// The smallest noise multiplier that meets a target epsilon.
    Calibrate(calibrate::CalibrateArgs),
    /// The banded Toeplitz strategy of BandMF's correlated noise: coefficients, error, sensitivity.
    Bandmf(bandmf::BandmfArgs),
    /// Train a model with DP-SGD / DP-Adam (or the unperturbed baseline) and report its privacy.
    Train(train::TrainArgs),
    /// Search hyper-parameters with the whole search's privacy accounted (only the best released).
    Tune(tune::TuneArgs),
    /// Time DP-SGD against the unperturbed baseline (ms per lot and their ratio).
    Bench(bench::BenchArgs),
    /// DP-ERM on a CSV table: input perturbation, DBDP-ERM and the certified baselines over epsilon.
    Erm(erm::ErmArgs),
    /// Empirical lower bounds on a DP-ERM mechanism's epsilon (one-run audit with canaries).
    Audit(audit::AuditArgs),
    /// Datasets: `dptrain data fetch mnist|fashion-mnist|cifar10`; `dptrain data synth` (synthetic pretraining images).
    Data(data::DataArgs),
    /// Write a completed run's model (safetensors, its privacy report in the metadata) with tensors renamed.
    Export(export::ExportArgs),
    /// Overlay the curves (accuracy and loss against steps and epsilon) of run folders in one SVG.
    Plot(plot::PlotArgs),
    /// Check that this machine's device (GPU) computes the DP kernels and step as the CPU does.
    Selftest(selftest::SelftestArgs),
}

/// Parses the command line, runs the command and maps every error to one line and an exit code.
pub fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version: print as clap renders them.
            return match put!("{e}").and_then(|()| flushed()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => failed(&format!("error: {e}")),
            };
        }
        Err(e) => {
            // clap's message may continue on indented lines (e.g. the missing flags): keep them,
            // drop the usage block, print one line.
            let rendered = e.render().to_string();
            let message: Vec<&str> = rendered.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
            eprintln!("{} (see dptrain --help)", message.join(" "));
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Account(args) => account::run(args),
        Command::Calibrate(args) => calibrate::run(args),
        Command::Bandmf(args) => bandmf::run(args),
        Command::Train(args) => train::run(args),
        Command::Tune(args) => tune::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Erm(args) => erm::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Data(args) => data::run(args),
        Command::Export(args) => export::run(args),
        Command::Plot(args) => plot::run(args),
        Command::Selftest(args) => selftest::run(args),
    };
    match result.and_then(|()| flushed()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A cause whose message its parent already shows (an error that keeps its source
            // and prints it) is not repeated.
            let mut chain: Vec<String> = Vec::new();
            for cause in e.chain().map(ToString::to_string) {
                if !chain.last().is_some_and(|shown| shown.contains(&cause)) {
                    chain.push(cause);
                }
            }
            let line = words::in_flags(&chain.join(": ")).replace('\n', " ");
            let interrupted = matches!(e.downcast_ref(), Some(dp_engine::EngineError::Interrupted(_)));
            if interrupted {
                // As a shell reports a process ended by SIGINT.
                let _ = writeln!(std::io::stderr(), "{line}");
                return ExitCode::from(130);
            }
            failed(&format!("error: {line}"))
        }
    }
}

/// The error of a write to standard output that failed.
pub(crate) fn stdout_error(e: std::io::Error) -> anyhow::Error {
    anyhow::anyhow!("standard output could not be written ({e}): nothing else was lost")
}

/// Standard output flushed: what is still buffered at the end is written, or the command fails.
fn flushed() -> anyhow::Result<()> {
    std::io::stdout().flush().map_err(stdout_error)
}

/// Says `line` on stderr (quietly dropped where stderr cannot be written either) and fails.
fn failed(line: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "{line}");
    ExitCode::FAILURE
}
