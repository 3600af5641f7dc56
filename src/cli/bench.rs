//! `dptrain bench`: the time cost of privacy, as milliseconds per lot of DP-SGD against the
//! unperturbed baseline on the same model, lot and device.

use super::enum_arg::parse;
use anyhow::Result;
use clap::Args;
use dp_data::DatasetName;
use dp_engine::activation::Activation;
use dp_engine::bench::{BenchConfig, bench};
use dp_engine::zoo::{ModelSpec, Normalization};
use dp_engine::{DeviceChoice, ModelName};
use indicatif::ProgressBar;
use serde_json::json;

/// Milliseconds per lot of `--mechanism none`, `gaussian` (DP-SGD: per-example clipping and noise)
/// and `ls-sgd` (DP-LSSGD, s = 1 per tensor) on random inputs of the dataset's shape, interleaved
/// after warm-up, and their ratios.
///
/// Example (the Opacus comparison on a CPU):
///   dptrain bench --model mnist-cnn --lot-size 256 --device cpu
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Model: mnist-cnn, xiang-mnist, cifar10-cnn, logreg or mlp.
    #[arg(long, value_parser = parse::<ModelName>, default_value = "mnist-cnn")]
    model: ModelName,

    /// Dataset whose input shape is used: fashion-mnist, mnist or cifar10.
    #[arg(long, value_parser = parse::<DatasetName>, default_value = "fashion-mnist")]
    dataset: DatasetName,

    /// Activation: tanh or relu.
    #[arg(long, value_parser = parse::<Activation>, default_value = "tanh")]
    activation: Activation,

    /// Examples per lot.
    #[arg(long, default_value_t = 256)]
    lot_size: usize,

    /// Examples per physical batch [default: the lot size].
    #[arg(long)]
    batch_size: Option<usize>,

    /// Device: auto, cpu or wgpu.
    #[arg(long, value_parser = parse::<DeviceChoice>, default_value = "auto")]
    device: DeviceChoice,

    /// Untimed lots per mechanism before timing.
    #[arg(long, default_value_t = 3)]
    warmup: usize,

    /// Timed lots per mechanism (the median is reported).
    #[arg(long, default_value_t = 20)]
    iterations: usize,

    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs `dptrain bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    let device = args.device.open()?;
    let config = BenchConfig {
        model: ModelSpec {
            name: args.model,
            activation: args.activation,
            hidden: None,
            normalization: Normalization::None,
        },
        input: args.dataset.shape(),
        classes: 10,
        lot_size: args.lot_size,
        batch_size: args.batch_size.unwrap_or(args.lot_size),
        warmup: args.warmup,
        iterations: args.iterations,
    };
    let bar = ProgressBar::new(3 * (args.warmup + args.iterations) as u64);
    let result = bench(&config, &device, &mut || bar.inc(1))?;
    bar.finish_and_clear();
    let ratio = result.gaussian / result.none;
    let ls_ratio = result.ls_sgd / result.gaussian;
    let device_name = format!("{} ({})", device.backend, device.name);
    if args.json {
        let out = json!({
            "device": device_name,
            "model": args.model.as_str(),
            "lot_size": args.lot_size,
            "batch_size": config.batch_size,
            "ms_per_lot": {"none": result.none, "gaussian": result.gaussian, "ls-sgd": result.ls_sgd},
            "ratio_gaussian": ratio,
            "ratio_ls_sgd_to_gaussian": ls_ratio,
        });
        println!("{out}");
    } else {
        println!(
            "device {device_name}, model {}, lot {} (batch {})",
            args.model.as_str(),
            args.lot_size,
            config.batch_size
        );
        println!("  none      {:9.2} ms per lot (median of {})", result.none, args.iterations);
        println!("  gaussian  {:9.2} ms per lot", result.gaussian);
        println!("  ls-sgd    {:9.2} ms per lot", result.ls_sgd);
        println!("  ratio gaussian / none: {ratio:.3}, ls-sgd / gaussian: {ls_ratio:.3}");
    }
    Ok(())
}
