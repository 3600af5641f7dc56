//! `dptrain bandmf`: the banded Toeplitz strategy of BandMF's correlated noise for a number of
//! steps and bands, its mean squared prefix-sum error and its sensitivity, beside DP-SGD's.

use anyhow::{Result, bail};
use clap::Args;
use dp_kernels::banded_strategy::BandedStrategy;
use serde_json::json;

/// The most steps a strategy is solved for (each evaluation costs steps x bands).
const MAX_STEPS: usize = 100_000;
/// The most bands.
const MAX_BANDS: usize = 256;

/// The b-banded lower-triangular Toeplitz strategy C (column norm 1) that minimises the mean
/// squared error of the prefix sums of `--steps` noisy gradients, the workload of SGD. Noise at
/// step t is (C^{-1} z)_t; each example is seen at most once every b steps (cyclic Poisson
/// sampling over b groups), so the sensitivity is the column norm, 1. One band is DP-SGD.
///
/// Example: the strategy of 16 bands for a 2,000-step run:
///   dptrain bandmf --steps 2000 --bands 16
#[derive(Args, Debug)]
pub struct BandmfArgs {
    /// Steps n of the run (at most 100,000).
    #[arg(long, value_name = "N")]
    steps: usize,

    /// Bands b: the strategy's coefficients (1 to min(steps, 256)).
    #[arg(long, value_name = "B")]
    bands: usize,

    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `dptrain bandmf`.
pub fn run(args: BandmfArgs) -> Result<()> {
    if args.steps > MAX_STEPS || args.bands > MAX_BANDS {
        bail!("--steps {} --bands {}: at most {MAX_STEPS} steps and {MAX_BANDS} bands", args.steps, args.bands);
    }
    let s = BandedStrategy::optimal(args.steps, args.bands).map_err(anyhow::Error::msg)?;
    let dp_sgd = (args.steps as f64 + 1.0) / 2.0;
    if args.json {
        let out = json!({
            "steps": s.steps,
            "bands": s.bands(),
            "coefficients": s.coefficients,
            "prefix_sum_error": s.error,
            "dp_sgd_prefix_sum_error": dp_sgd,
            "column_norm": s.column_norm(),
            "sensitivity": s.column_norm(),
        });
        say!("{out}")?;
        return Ok(());
    }
    say!("{} bands over {} steps", s.bands(), s.steps)?;
    say!(
        "mean squared prefix-sum error per unit noise = {:.6} (DP-SGD, one band: {dp_sgd:.6}; ratio {:.4})",
        s.error,
        s.error / dp_sgd
    )?;
    say!("column norm = sensitivity = {:.12} (one participation per {} steps)", s.column_norm(), s.bands())?;
    let coefficients: Vec<String> = s.coefficients.iter().map(|c| format!("{c:.10}")).collect();
    say!("coefficients c_0..c_{} = {}", s.bands() - 1, coefficients.join(" "))?;
    Ok(())
}
