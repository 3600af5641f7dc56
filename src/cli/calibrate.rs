//! `dptrain calibrate`: the smallest noise multiplier that meets a target epsilon.

use super::accountant_args::AccountantArgs;
use super::output::print_report;
use super::schedule::ScheduleArgs;
use anyhow::Result;
use clap::Args;
use dp_accounting::calibrate_noise_multiplier;
use serde_json::json;

/// The smallest noise multiplier whose run of `steps` steps is (target epsilon, delta)-DP, to 1e-5
/// relative precision.
///
/// Example: the noise for epsilon 3 over 60 epochs of batch 256 out of 60,000:
///   dptrain calibrate --target-epsilon 3 --dataset-size 60000 --batch-size 256 --epochs 60 --delta 1e-5
#[derive(Args, Debug)]
#[command(allow_negative_numbers = true)]
pub struct CalibrateArgs {
    /// The epsilon the run must not exceed.
    #[arg(long, short = 'e', value_name = "E")]
    target_epsilon: f64,

    #[command(flatten)]
    schedule: ScheduleArgs,

    #[command(flatten)]
    accountant: AccountantArgs,
}

/// Runs `dptrain calibrate`.
pub fn run(args: CalibrateArgs) -> Result<()> {
    let schedule = args.schedule.resolve()?;
    let accountant = args.accountant.build();
    let c = calibrate_noise_multiplier(
        accountant.as_ref(),
        args.target_epsilon,
        args.accountant.delta,
        schedule.sample_rate,
        schedule.steps,
    )?;
    let extra = [
        ("noise_multiplier", json!(c.noise_multiplier)),
        ("target_epsilon", json!(args.target_epsilon)),
        ("sample_rate", json!(schedule.sample_rate)),
        ("steps", json!(schedule.steps)),
        ("accountant_evaluations", json!(c.evaluations)),
    ];
    let headline = format!("noise multiplier = {:.6}\n", c.noise_multiplier);
    print_report(&headline, &c.report, &extra, args.accountant.json)
}
