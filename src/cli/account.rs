//! `dptrain account`: the epsilon a DP-SGD run (or a BandMF run with `--bands`) spends.

use super::accountant_args::AccountantArgs;
use super::output::print_report;
use super::schedule::ScheduleArgs;
use anyhow::{Result, bail};
use clap::Args;
use dp_accounting::{DpEvent, PrivacyLedger};
use serde_json::json;

/// Epsilon of `steps` Poisson-subsampled Gaussian steps (DP-SGD, DP-Adam) under add/remove-one
/// adjacency.
///
/// Example (the MNIST DP-SGD tutorial setting, 60 epochs of batch 256 out of 60,000):
///   dptrain account --noise-multiplier 1.1 --dataset-size 60000 --batch-size 256 --epochs 60 --delta 1e-5
///
/// With `--bands B` (BandMF with cyclic Poisson sampling; docs/MECHANISMS.md), the data is split
/// once into B groups of floor(N / B), step t samples group t mod B at rate batch / floor(N / B),
/// and an example is exposed at ceil(T / B) of the T steps.
#[derive(Args, Debug)]
#[command(allow_negative_numbers = true)]
pub struct AccountArgs {
    /// Noise standard deviation divided by the clipping norm (sigma in Abadi et al.).
    #[arg(long, short = 'z', value_name = "Z")]
    noise_multiplier: f64,

    #[command(flatten)]
    schedule: ScheduleArgs,

    /// Bands b of a BandMF run with cyclic Poisson sampling over b groups (needs --dataset-size
    /// and --batch-size); 1 is DP-SGD.
    #[arg(long, value_name = "B", default_value_t = 1)]
    bands: u64,

    #[command(flatten)]
    accountant: AccountantArgs,
}

/// Runs `dptrain account`.
pub fn run(args: AccountArgs) -> Result<()> {
    let schedule = args.schedule.resolve()?;
    let (ledger, rate, headline) = match (args.bands, args.schedule.sizes()) {
        (0, _) => bail!("--bands 0: a strategy has at least one band"),
        (1, _) => (
            PrivacyLedger::homogeneous(args.noise_multiplier, schedule.sample_rate, schedule.steps)?,
            schedule.sample_rate,
            String::new(),
        ),
        (b, Some((n, lot))) => {
            let group = n / b;
            if group < lot {
                bail!("--bands {b}: groups of {group} examples (of {n}) are smaller than the batch size {lot}");
            }
            let q = lot as f64 / group as f64;
            let mut ledger = PrivacyLedger::new();
            ledger.record_event(DpEvent::cyclic_banded(args.noise_multiplier, q, b, b)?, schedule.steps)?;
            let exposed: u64 = ledger.grouped()?.iter().map(|g| g.steps).sum();
            let headline = format!(
                "BandMF, {b} bands: {b} groups of {group} ({} left out), rate {q:.6} within a group, an example in {exposed} of {} steps\n",
                n % b,
                schedule.steps
            );
            (ledger, q, headline)
        }
        (b, None) => bail!("--bands {b} needs --dataset-size and --batch-size (the groups' size), not --sample-rate"),
    };
    let report = args.accountant.build().epsilon(&ledger, args.accountant.delta)?;
    let extra = [
        ("noise_multiplier", json!(args.noise_multiplier)),
        ("sample_rate", json!(rate)),
        ("steps", json!(schedule.steps)),
        ("bands", json!(args.bands)),
    ];
    print_report(&headline, &report, &extra, args.accountant.json)
}
