//! `dptrain erm`: the DP-ERM experiment of Kang et al.'s two papers on a CSV table: every method at
//! every epsilon, repeated, as a table (terminal, CSV, JSON) and two SVG plots.

use super::device::open;
use super::progress::Progress;
use super::table_args::{SettingsArgs, TableArgs};
use anyhow::{Context, Result, bail};
use clap::Args;
use dp_data::TabularData;
use dp_data::safe_files::{PUBLIC, write_atomic};
use dp_engine::DeviceChoice;
use dp_erm::methods::{Took, cost};
use dp_erm::plot::{Metric, draw};
use dp_erm::{Compute, Experiment, ExperimentReport, Method, ModelKind, Problem};
use std::path::{Path, PathBuf};

/// Train logistic regression or an MLP privately on a CSV table with the papers' DP-ERM methods
/// and the certified baselines, and report test accuracy and optimality gap over epsilon.
///
/// Methods: input (Kang et al., input perturbation, Alg. 1), dbdp and dbdp-if (Kang et al., DBDP-ERM, Algs. 1-2), all `paper-bound`;
/// gradient (DP-SGD, RDP), output (output perturbation) and objective (Kifer et al. 2012), all
/// `certified` where the loss meets the theorem's conditions and refused with the reason where
/// not; non-private (L* and the accuracy ceiling).
///
/// Features are min-max scaled on the training rows, an intercept is appended and each row is
/// projected into the unit ball, as the papers assume. The non-private optimum, dbdp-if, output
/// and objective perturbation run in f64 on the host; the training loops of input, dbdp and
/// gradient run where --device says.
///
/// Example (Breast Cancer from scikit-learn's wheel, see scripts/tabular-data.sh):
///   dptrain erm --dataset data/tabular/breast_cancer.csv --label target --model logreg
#[derive(Args, Debug)]
#[command(allow_negative_numbers = true)]
pub struct ErmArgs {
    #[command(flatten)]
    table: TableArgs,

    #[command(flatten)]
    settings: SettingsArgs,

    /// Model: logreg (softmax regression for more than two classes) or mlp.
    #[arg(long, default_value = "logreg", value_parser = ["logreg", "mlp"])]
    model: String,

    /// Comma-separated methods: input, dbdp, dbdp-if, gradient, output, objective, non-private.
    #[arg(long, default_value = "input,dbdp,dbdp-if,gradient,output,objective,non-private")]
    methods: String,

    /// Comma-separated privacy budgets epsilon.
    #[arg(long, default_value = "0.01,0.05,0.1,0.25,1,7", allow_hyphen_values = true)]
    epsilons: String,

    /// Runs per (method, epsilon).
    #[arg(long, default_value_t = 5)]
    repeats: usize,

    /// Where the training loops of input, dbdp and gradient sum their gradients: host (f64, one
    /// example at a time: exact, and the fastest for tables of a few thousand rows), cpu (Burn's
    /// flex backend, f32, one batched pass per step), wgpu (Burn's wgpu backend, f32: a GPU, or
    /// Mesa's lavapipe where there is none), cuda (an NVIDIA GPU, in a build with `--features
    /// cuda`), or auto (a GPU: CUDA in a CUDA build, else wgpu on a real GPU; else host).
    #[arg(long, default_value = "host", value_parser = ["host", "cpu", "wgpu", "cuda", "auto"])]
    device: String,

    /// Seed every run's noise for reproducibility (never for a release: the noise is then known).
    #[arg(long)]
    seed: Option<u64>,

    /// Folder for table.csv, report.json, accuracy.svg and gap.svg.
    #[arg(long, default_value = "erm-results")]
    out: PathBuf,

    /// Also write each run's perturbed training set D_priv (input, dbdp, dbdp-if) as CSV under
    /// OUT/private-data.
    #[arg(long)]
    write_private_data: bool,

    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

pub(super) fn list<T>(text: &str, what: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    let items: Vec<T> = text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(parse).collect::<Result<_>>()?;
    if items.is_empty() {
        bail!("--{what} is empty");
    }
    Ok(items)
}

pub(super) fn epsilon(text: &str) -> Result<f64> {
    match text.parse::<f64>() {
        Ok(e) if e.is_finite() && e > 0.0 => Ok(e),
        _ => bail!("invalid epsilon '{text}': every epsilon must be a positive number"),
    }
}

/// The class names joined by '/', or the first and last few with the count when there are many.
fn class_list(classes: &[String]) -> String {
    const SHOWN: usize = 4;
    if classes.len() <= 2 * SHOWN {
        return classes.join("/");
    }
    let (head, tail) = (&classes[..SHOWN], &classes[classes.len() - SHOWN..]);
    format!("{}/.../{} ({} classes)", head.join("/"), tail.join("/"), classes.len())
}

/// Runs the experiment.
pub fn run(args: ErmArgs) -> Result<()> {
    let methods = list(&args.methods, "methods", |m| Ok(Method::parse(m)?))?;
    let epsilons = list(&args.epsilons, "epsilons", epsilon)?;
    if args.repeats == 0 {
        bail!("--repeats must be at least 1");
    }
    let (table, train, test) = args.table.load()?;
    let settings = args.settings.settings();
    // Checked before the progress lines start, so that a bad flag is the only line printed.
    settings.validate()?;
    let kind = if args.model == "mlp" { ModelKind::Mlp } else { ModelKind::Logreg };
    let compute = compute(&args.device)?;
    let solving = Progress::spinner(&format!(
        "solving the non-private problem on {} rows of {} features in {} classes (L*, the optimum every gap is measured from)",
        train.len(),
        train.dim,
        train.classes.len()
    ));
    let problem = Problem::new(kind, train, test, settings)?.with_compute(compute);
    solving.finish();
    let private_dir = args.write_private_data.then(|| args.out.join("private-data"));
    std::fs::create_dir_all(private_dir.as_ref().unwrap_or(&args.out))
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let experiment = Experiment {
        problem: &problem,
        methods,
        epsilons,
        repeats: args.repeats,
        seed: args.seed,
        private_data_dir: private_dir,
    };
    estimate(&problem, &experiment);
    let bar = Progress::new(Some(experiment.total_runs() as u64), "runs");
    let mut cell = String::new();
    let report = experiment.run(|method, eps, done| {
        let now = format!("{method} eps {}", eps.map_or("-".into(), |e| e.to_string()));
        if now != cell {
            bar.set_message(format!("{now} ({} parameters)", problem.model.dim()));
            cell = now;
        }
        bar.set_position(done as u64);
    })?;
    bar.finish();
    let written = write(&report, &args.out)?;
    if args.json {
        say!("{}", serde_json::to_string(&report)?)?;
    } else {
        print_summary(&args, &table, &report)?;
        say!("wrote {}", written.join(", "))?;
    }
    Ok(())
}

/// Prints, before the runs, what each method will take: one pass over the training rows timed,
/// times the passes a run of the method makes (an experiment of hours says so first).
fn estimate(problem: &Problem, experiment: &Experiment<'_>) {
    let pass = problem.pass_seconds();
    eprintln!(
        "estimated time (one pass over the {} training rows, {} parameters, takes {}):",
        problem.train.len(),
        problem.model.dim(),
        Took(pass)
    );
    let (mut expected, mut most) = (0.0, 0.0);
    for &m in &experiment.methods {
        let runs = experiment.runs_of(m);
        let (e, at_most) = cost(problem, m).seconds(runs, pass);
        let bound = if at_most > e * 1.5 { format!(", at most {}", Took(at_most)) } else { String::new() };
        eprintln!("  {:<12} {} for {runs} run(s){bound}", m.name(), Took(e));
        (expected, most) = (expected + e, most + at_most);
    }
    let bound = if most > expected * 1.5 { format!(", at most {}", Took(most)) } else { String::new() };
    eprintln!("  in all       about {}{bound}", Took(expected));
}

/// Where the training loops run: the host, or a device (`auto`: a real GPU if there is one).
fn compute(device: &str) -> Result<Compute> {
    Ok(match device {
        "host" => Compute::Host,
        "cpu" => Compute::Device(open(DeviceChoice::Cpu)?),
        "wgpu" => Compute::Device(open(DeviceChoice::Wgpu)?),
        "cuda" => Compute::Device(open(DeviceChoice::Cuda)?),
        _ => match open(DeviceChoice::Auto)? {
            gpu if gpu.hardware => Compute::Device(gpu),
            _ => Compute::Host,
        },
    })
}

/// Writes the report's table (CSV), the report (JSON) and, when a private method ran, its two
/// plots into `out`; the paths written.
fn write(report: &ExperimentReport, out: &Path) -> Result<Vec<String>> {
    let csv = out.join("table.csv");
    write_atomic(&csv, report.to_csv().as_bytes(), PUBLIC)?;
    let json_path = out.join("report.json");
    let json = serde_json::to_string_pretty(report)?;
    write_atomic(&json_path, json.as_bytes(), PUBLIC)?;
    let mut written = vec![csv.display().to_string(), json_path.display().to_string()];
    if report.rows.iter().any(|r| r.method.is_private() && r.runs > 0) {
        for (metric, title, file) in
            [(Metric::Accuracy, "Test accuracy", "accuracy.svg"), (Metric::Gap, "Optimality gap", "gap.svg")]
        {
            let path = out.join(file);
            draw(report, metric, title, &path)?;
            written.push(path.display().to_string());
        }
    }
    Ok(written)
}

/// The data, the problem's constants, the non-private optimum, the table and the methods' notes.
fn print_summary(args: &ErmArgs, table: &TabularData, report: &ExperimentReport) -> Result<()> {
    let c = &report.constants;
    say!(
        "{}: {} training rows, {} test rows, {} features (intercept included), classes {}",
        args.table.dataset.display(),
        report.train_rows,
        report.test_rows,
        report.features,
        class_list(&report.classes)
    )?;
    if table.missing.imputed_cells + table.missing.dropped_rows > 0 {
        say!(
            "missing values: {} cells imputed, {} rows dropped ({:?})",
            table.missing.imputed_cells,
            table.missing.dropped_rows,
            table.missing.by_column
        )?;
    }
    let opt = |v: Option<f64>| v.map_or("none (not convex)".to_string(), |v| format!("{v:.4}"));
    say!(
        "{} ({} parameters), lambda {}: G = {:.4} on the ball of radius {:.4}, L = {}, Delta = {}",
        report.model,
        report.parameters,
        report.settings.lambda,
        c.lipschitz,
        c.radius,
        opt(c.smoothness),
        opt(c.strong_convexity)
    )?;
    say!("training loops of input, dbdp, gradient on {}", report.device)?;
    say!(
        "non-private: L* = {:.6}, test accuracy {:.2}%; delta = {:e}, {} run(s) per cell{}",
        report.l_star,
        100.0 * report.non_private_accuracy,
        report.settings.delta,
        args.repeats,
        if args.seed.is_some() { " (seeded: reproducible noise, not for release)" } else { "" }
    )?;
    say!()?;
    put!("{}", report.to_table())?;
    say!()?;
    let mut seen = Vec::new();
    for row in report.rows.iter().filter(|r| !r.notes.is_empty()) {
        if !seen.contains(&row.method) {
            seen.push(row.method);
            let at = row.epsilon.map_or(String::new(), |e| format!(" (epsilon {e})"));
            say!("{}{at}: {}", row.method, row.notes.join("; "))?;
        }
    }
    Ok(())
}
