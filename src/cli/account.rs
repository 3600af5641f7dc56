//! `dptrain account`: the epsilon a DP-SGD run spends.

use super::accountant_args::AccountantArgs;
use super::output::print_report;
use super::schedule::ScheduleArgs;
use anyhow::Result;
use clap::Args;
use dp_accounting::PrivacyLedger;
use serde_json::json;

/// Epsilon of `steps` Poisson-subsampled Gaussian steps (DP-SGD, DP-Adam) under add/remove-one
/// adjacency.
///
/// Example (the MNIST DP-SGD tutorial setting, 60 epochs of batch 256 out of 60,000):
///   dptrain account --noise-multiplier 1.1 --dataset-size 60000 --batch-size 256 --epochs 60 --delta 1e-5
#[derive(Args, Debug)]
#[command(allow_negative_numbers = true)]
pub struct AccountArgs {
    /// Noise standard deviation divided by the clipping norm (sigma in Abadi et al.).
    #[arg(long, short = 'z', value_name = "Z")]
    noise_multiplier: f64,

    #[command(flatten)]
    schedule: ScheduleArgs,

    #[command(flatten)]
    accountant: AccountantArgs,
}

/// Runs `dptrain account`.
pub fn run(args: AccountArgs) -> Result<()> {
    let schedule = args.schedule.resolve()?;
    let ledger = PrivacyLedger::homogeneous(args.noise_multiplier, schedule.sample_rate, schedule.steps)?;
    let report = args.accountant.build().epsilon(&ledger, args.accountant.delta)?;
    let extra = [
        ("noise_multiplier", json!(args.noise_multiplier)),
        ("sample_rate", json!(schedule.sample_rate)),
        ("steps", json!(schedule.steps)),
    ];
    print_report("", &report, &extra, args.accountant.json)
}
