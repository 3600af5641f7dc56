//! `dptrain bench`: the time cost of privacy, as milliseconds per lot of each mechanism against
//! the unperturbed baseline on the same model, lot and device (and Xiang et al.'s Table I).

use super::enum_arg::parse;
use super::progress::Progress;
use anyhow::{Result, bail};
use clap::Args;
use dp_data::DatasetName;
use dp_engine::DeviceChoice;
use dp_engine::host::Machine;
use dp_engine::host::Phase;
use dp_engine::nn::activation::Activation;
use dp_engine::privacy::mechanism::MechanismName;
use dptrain::bench::{BENCHED, BenchConfig, BenchResult, bench};
use dptrain::zoo::ModelName;
use dptrain::zoo::{ModelSpec, Normalization};
use serde_json::json;

/// Milliseconds per lot of the unperturbed baseline (`none`), `gaussian` (DP-SGD), `optimized`
/// (sound, per-layer sigma), `optimized-paper` (per-coordinate sigma from the device solver, w
/// recomputed every lot over the benchmark's data) and `ls-sgd` (s = 1 per tensor) on random inputs
/// of the dataset's shape, interleaved after warm-up, with their ratios to none and to gaussian.
///
/// Examples:
///   dptrain bench --model mnist-cnn --lot-size 256 --device cpu
///   dptrain bench --table1 --iterations 5 --warmup 1     (Xiang et al.'s Table I workloads)
#[derive(Args, Debug)]
#[command(allow_negative_numbers = true)]
pub struct BenchArgs {
    /// Xiang et al.'s Table I: MNIST (xiang-mnist, lot 1000 in batches of 500), SVHN-shaped (32x32x3,
    /// cifar10-cnn, lot 200) and CIFAR-10 (cifar10-cnn, lot 500); replaces the model and sizes.
    #[arg(long, conflicts_with_all = ["model", "dataset", "lot_size", "batch_size"])]
    table1: bool,

    /// Model: mnist-cnn, xiang-mnist, cifar10-cnn, logreg, mlp or wrn-16-4.
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

    /// Device: auto, cpu, ndarray (a build with `--features ndarray`), wgpu or cuda (a build with
    /// `--features cuda`).
    #[arg(long, value_parser = parse::<DeviceChoice>, default_value = "auto")]
    device: DeviceChoice,

    /// Untimed lots per mechanism before timing.
    #[arg(long, default_value_t = 3)]
    warmup: usize,

    /// Timed lots per mechanism (the median is reported).
    #[arg(long, default_value_t = 20)]
    iterations: usize,

    /// Comma-separated mechanisms to time [default: none,gaussian,optimized,optimized-paper,ls-sgd].
    #[arg(long, value_name = "LIST")]
    mechanisms: Option<String>,

    /// Also time each phase of the steps (forward, backward, norms, clip factors, clipped sums,
    /// noise, update), the device synchronised at every boundary: where a mechanism's time goes;
    /// and list the kernel that ran each pass of each layer (always in --json).
    #[arg(long)]
    phases: bool,

    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// One benchmarked setting.
struct Workload {
    name: &'static str,
    model: ModelName,
    input: [usize; 3],
    lot_size: usize,
    batch_size: usize,
}

/// Xiang et al.'s Table I settings.
fn table1() -> [Workload; 3] {
    [
        Workload { name: "MNIST", model: ModelName::XiangMnist, input: [1, 28, 28], lot_size: 1000, batch_size: 500 },
        Workload {
            name: "SVHN-shaped",
            model: ModelName::Cifar10Cnn,
            input: [3, 32, 32],
            lot_size: 200,
            batch_size: 200,
        },
        Workload { name: "CIFAR-10", model: ModelName::Cifar10Cnn, input: [3, 32, 32], lot_size: 500, batch_size: 500 },
    ]
}

fn name(m: MechanismName) -> String {
    serde_json::to_value(m).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
}

/// Runs `dptrain bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    let device = super::device::open(args.device)?;
    let mechanisms: Vec<MechanismName> = match &args.mechanisms {
        Some(list) => list
            .split(',')
            .map(|m| parse::<MechanismName>(m.trim()))
            .collect::<Result<_, _>>()
            .map_err(anyhow::Error::msg)?,
        None => BENCHED.to_vec(),
    };
    let workloads = workloads(&args)?;
    let configs: Vec<BenchConfig> = workloads.iter().map(|w| config(w, &args, &mechanisms)).collect();
    // Every workload is checked before the first is timed (and before a progress line).
    for config in &configs {
        config.check()?;
    }
    let per_workload = (mechanisms.len() * (args.warmup + args.iterations)) as u64;
    let bar = Progress::new(Some(per_workload * workloads.len() as u64), "lots");
    let mut rows = Vec::new();
    for (w, config) in workloads.iter().zip(&configs) {
        bar.set_message(w.name.to_string());
        rows.push((w, bench(config, &device, &mut || bar.inc())?));
    }
    bar.finish();
    let device_name = format!("{} ({})", device.backend, device.name);
    // A CPU ratio holds for one machine: the figures name theirs.
    let machine = Machine::this();
    if args.json {
        let out = json!({"device": device_name, "machine": machine, "iterations": args.iterations, "workloads": json_rows(&rows)});
        say!("{out}")?;
    } else {
        say!(
            "device {device_name}; machine {machine}; median ms per lot of {} timed lots after {} warm-up",
            args.iterations,
            args.warmup
        )?;
        print_table(&rows, &mechanisms, device.is_cube())?;
    }
    Ok(())
}

/// The workloads asked for: Xiang et al.'s Table 1, or the one of the flags.
fn workloads(args: &BenchArgs) -> Result<Vec<Workload>> {
    if args.table1 {
        return Ok(table1().into());
    }
    let Some(input) = args.dataset.shape() else {
        bail!(
            "--dataset: bench measures a named dataset's shape (mnist, fashion-mnist or cifar10), not {:?}",
            args.dataset
        );
    };
    Ok(vec![Workload {
        name: args.model.as_str(),
        model: args.model,
        input,
        lot_size: args.lot_size,
        batch_size: args.batch_size.unwrap_or(args.lot_size),
    }])
}

/// The benchmark of workload `w` for `mechanisms`, as the flags say.
fn config(w: &Workload, args: &BenchArgs, mechanisms: &[MechanismName]) -> BenchConfig {
    BenchConfig {
        model: ModelSpec {
            name: w.model,
            activation: args.activation,
            hidden: None,
            normalization: Normalization::None,
        },
        input: w.input,
        classes: 10,
        lot_size: w.lot_size,
        batch_size: w.batch_size,
        warmup: args.warmup,
        iterations: args.iterations,
        mechanisms: mechanisms.to_vec(),
        phases: args.phases,
    }
}

/// The timed workloads as JSON: times, ratios to none and to gaussian, launches.
fn json_rows(rows: &[(&Workload, BenchResult)]) -> Vec<serde_json::Value> {
    rows.iter()
        .map(|(w, r)| {
            let (none, gaussian) = (r.ms(MechanismName::None), r.ms(MechanismName::Gaussian));
            let map = |f: &dyn Fn(f64) -> f64| -> serde_json::Map<String, serde_json::Value> {
                r.ms_per_lot.iter().map(|(m, t)| (name(*m), json!(f(*t)))).collect()
            };
            json!({
                "name": w.name,
                "model": w.model.as_str(),
                "input": w.input,
                "lot_size": w.lot_size,
                "batch_size": w.batch_size,
                "ms_per_lot": map(&|t| t),
                "ratio_to_none": map(&|t| t / none),
                "ratio_to_gaussian": map(&|t| t / gaussian),
                "launches_per_lot": r.launches_per_lot.iter().map(|(m, n)| (name(*m), json!(n))).collect::<serde_json::Map<_, _>>(),
                "phases_ms": r.phases_ms.iter().map(|(m, ms)| {
                    let phases: serde_json::Map<_, _> = Phase::ALL.iter().zip(ms).map(|(p, t)| (p.name().to_string(), json!(t))).collect();
                    (name(*m), json!(phases))
                }).collect::<serde_json::Map<_, _>>(),
                "kernels": r.kernels.iter().map(|l| {
                    let mut row = serde_json::Map::new();
                    row.insert("layer".into(), json!(l.layer));
                    for (pass, kernels) in &l.passes {
                        row.insert(pass.name().into(), json!(kernels));
                    }
                    row
                }).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// The timed workloads as a table with the mechanisms' ratios (and, on wgpu, the launches).
fn print_table(rows: &[(&Workload, BenchResult)], mechanisms: &[MechanismName], launches: bool) -> Result<()> {
    let header: Vec<String> = mechanisms.iter().map(|m| format!("{:>16}", name(*m))).collect();
    say!(
        "{:<12} {:>6} {:>6} {}   {:>9} {:>9} {:>9} {:>9}",
        "workload",
        "lot",
        "batch",
        header.join(""),
        "gauss/none",
        "opt/gauss",
        "paper/gauss",
        "ls/gauss"
    )?;
    for (w, r) in rows {
        let cells: Vec<String> = r.ms_per_lot.iter().map(|(_, t)| format!("{t:>16.2}")).collect();
        let g = r.ms(MechanismName::Gaussian);
        // A ratio of a mechanism that was not timed is shown as "-".
        let ratio =
            |t: f64, width: usize| if t.is_nan() { format!("{:>width$}", "-") } else { format!("{t:>width$.3}") };
        say!(
            "{:<12} {:>6} {:>6}{}   {} {} {} {}",
            w.name,
            w.lot_size,
            w.batch_size,
            cells.join(""),
            ratio(g / r.ms(MechanismName::None), 10),
            ratio(r.ms(MechanismName::Optimized) / g, 9),
            ratio(r.ms(MechanismName::OptimizedPaper) / g, 11),
            ratio(r.ms(MechanismName::LsSgd) / g, 9)
        )?;
    }
    for (w, r) in rows.iter().filter(|(_, r)| !r.phases_ms.is_empty()) {
        say!("{}: median ms per lot in each phase", w.name)?;
        let heads: Vec<String> = r.phases_ms.iter().map(|(m, _)| format!("{:>12}", name(*m))).collect();
        say!("  {:<14}{}", "phase", heads.join(""))?;
        for (p, phase) in Phase::ALL.iter().enumerate() {
            let cells: Vec<String> = r.phases_ms.iter().map(|(_, ms)| format!("{:>12.2}", ms[p])).collect();
            say!("  {:<14}{}", phase.name(), cells.join(""))?;
        }
        say!("{}: the kernel of each pass of each layer", w.name)?;
        for l in &r.kernels {
            let passes: Vec<String> = l
                .passes
                .iter()
                .map(|(pass, kernels)| {
                    let names: Vec<&str> = kernels.iter().map(|k| k.name()).collect();
                    format!("{} {}", pass.name(), names.join("+"))
                })
                .collect();
            say!("  {}: {}", l.layer, passes.join(", "))?;
        }
    }
    if launches {
        for (w, r) in rows {
            let counts: Vec<String> = r.launches_per_lot.iter().map(|(m, n)| format!("{} {n}", name(*m))).collect();
            say!("{}: device kernels launched per lot: {}", w.name, counts.join(", "))?;
        }
    }
    say!(
        "targets: gaussian/none <= 1.3, optimized/gaussian <= 1.1, ls-sgd/gaussian <= 1.05 (Xiang et al. measured 1.81 and 2.72 on MNIST)"
    )?;
    Ok(())
}
