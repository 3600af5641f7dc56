//! `dptrain selftest`: the device kernels and one DP step checked on this machine's device
//! against their CPU references (`dp_engine::selftest`), one line per check, a non-zero exit on
//! any failure.

use super::enum_arg::parse;
use anyhow::{Result, bail};
use clap::Args;
use dp_engine::DeviceChoice;
use dp_engine::selftest::{Check, SUITES, Untouched, run_suite};
use serde_json::json;
use std::time::Instant;

/// Check that this machine's device computes what the privacy analysis assumes.
///
/// Runs the noise kernel (its ChaCha20 words bit for bit, its normals, and 2^21 draws against the
/// normal law: mean, variance, a Kolmogorov-Smirnov test, the tail beyond 4 sigma), Laplacian
/// smoothing against the FFT, the sigma solver against its closed form, im2col, and one DP
/// step's per-example norms and clipped sums against the naive per-example loop on the CPU
/// reference. Each line is a check: what was compared, the deviation measured, its tolerance.
/// Exits with status 1 when any check fails. On a CPU device the kernels are their own
/// references: the self-test is for GPUs (wgpu, cuda). The first run on a GPU compiles kernels.
///
/// Example: dptrain selftest --device cuda
#[derive(Args, Debug)]
pub struct SelftestArgs {
    /// Device: auto, cpu, ndarray (a build with `--features ndarray`), wgpu or cuda (a build with
    /// `--features cuda`).
    #[arg(long, value_parser = parse::<DeviceChoice>, default_value = "auto")]
    device: DeviceChoice,

    /// Print one JSON object on stdout instead of lines.
    #[arg(long)]
    json: bool,
}

/// Runs `dptrain selftest`.
pub fn run(args: SelftestArgs) -> Result<()> {
    let started = Instant::now();
    // The self-test is the whole proof: a named device opens unproven so that it reports every
    // check; `auto` chooses as a run would.
    let device = match args.device {
        DeviceChoice::Auto => super::device::open(args.device)?,
        named => named.open_with(&|_| Ok(()))?,
    };
    // With `auto`, the smoke run of each GPU it tried (docs/BENCHMARKS.md, "The GPU check").
    let open_seconds = started.elapsed().as_secs_f64();
    let device_name = format!("{} ({})", device.backend, device.name);
    if !args.json {
        say!("selftest on {device_name}")?;
        if !device.is_cube() {
            say!("(a CPU device: its kernels are the references, so only the DP step compares two computations)")?;
        }
    }
    let mut checks: Vec<Check> = Vec::new();
    for suite in SUITES {
        let done = run_suite(suite, &device.device, &Untouched);
        if !args.json {
            done.iter().try_for_each(print_line)?;
        }
        checks.extend(done);
    }
    let failed = checks.iter().filter(|c| !c.passed()).count();
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        let rows: Vec<_> = checks.iter().map(|c| json!({"check": c, "passed": c.passed()})).collect();
        let tried = &device.tried;
        say!(
            "{}",
            json!({"device": device_name, "checks": rows, "failed": failed, "seconds": seconds, "open_seconds": open_seconds, "tried": tried})
        )?;
    } else {
        say!("{} of {} checks passed in {seconds:.1} s", checks.len() - failed, checks.len())?;
    }
    if failed > 0 {
        bail!("selftest: {failed} of {} checks failed on {device_name}", checks.len());
    }
    Ok(())
}

/// One check as a line: verdict, measured deviation, tolerance, what was compared.
fn print_line(c: &Check) -> Result<()> {
    let verdict = if c.passed() { "ok  " } else { "FAIL" };
    match (&c.error, c.measured) {
        (Some(error), _) => say!("{verdict} {}: {error}", c.name)?,
        (None, Some(m)) => say!("{verdict} {:>9} (tolerance {})  {}", number(m), number(c.tolerance), c.name)?,
        (None, None) => say!("{verdict} {}", c.name)?,
    }
    Ok(())
}

/// A deviation as a reader takes it in: 0, three decimals between 0.01 and 10^4, else powers of ten.
fn number(x: f64) -> String {
    match x.abs() {
        0.0 => "0".into(),
        a if (1e-2..1e4).contains(&a) => format!("{}", (x * 1e3).round() / 1e3),
        _ => format!("{x:.2e}"),
    }
}
