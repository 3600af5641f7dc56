//! `dptrain erm`: the DP-ERM experiment of seeds 000/001 and 003 on a CSV table: every method at
//! every epsilon, repeated, as a table (terminal, CSV, JSON) and two SVG plots.

use anyhow::{Context, Result, bail};
use clap::Args;
use dp_data::{CsvOptions, HeaderMode, LabelColumn, MissingValues, UnitBallScaler, load_csv};
use dp_erm::plot::{Metric, draw};
use dp_erm::{Experiment, Method, ModelKind, Problem, Settings};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

/// Train logistic regression or an MLP privately on a CSV table with the papers' DP-ERM methods
/// and the certified baselines, and report test accuracy and optimality gap over epsilon.
///
/// Methods: input (seed 000 Alg. 1), dbdp and dbdp-if (seed 003 Algs. 1-2), all `paper-bound`;
/// gradient (DP-SGD, RDP), output (output perturbation) and objective (Kifer et al. 2012), all
/// `certified` where the loss meets the theorem's conditions and refused with the reason where
/// not; non-private (L* and the accuracy ceiling).
///
/// Features are min-max scaled on the training rows, an intercept is appended and each row is
/// projected into the unit ball, as the papers assume. The models are small and run in f64 on the
/// CPU.
///
/// Example (Breast Cancer from scikit-learn's wheel, see scripts/tabular-data.sh):
///   dptrain erm --dataset data/tabular/breast_cancer.csv --label target --model logreg
#[derive(Args, Debug)]
pub struct ErmArgs {
    /// The CSV table.
    #[arg(long)]
    dataset: PathBuf,

    /// The label column: a header name or a 0-based index [default: the last column].
    #[arg(long)]
    label: Option<String>,

    /// Whether the first line is a header: auto, yes or no.
    #[arg(long, default_value = "auto", value_parser = ["auto", "yes", "no"])]
    header: String,

    /// Rows with missing feature values ("", "?", "NA"): impute (column mean or mode) or drop.
    #[arg(long, default_value = "impute", value_parser = ["impute", "drop"])]
    missing: String,

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

    /// delta of every guarantee.
    #[arg(long, default_value_t = Settings::default().delta)]
    delta: f64,

    /// L2 regularization lambda (the strong convexity Delta of logistic and softmax regression).
    #[arg(long, default_value_t = Settings::default().lambda)]
    lambda: f64,

    /// Iterations T of every iterative method.
    #[arg(long, default_value_t = Settings::default().rounds)]
    rounds: u64,

    /// Step size [default: 1/L for logreg, 0.5 for the MLP].
    #[arg(long)]
    learning_rate: Option<f64>,

    /// Sampling rate q (DBDP minibatches of qn rows; DP-SGD Poisson rate).
    #[arg(long, default_value_t = Settings::default().sample_rate)]
    sample_rate: f64,

    /// The papers' unspecified constant c in the noise formulas.
    #[arg(long, default_value_t = Settings::default().c)]
    c: f64,

    /// The unspecified constant c1 of DBDP Theorem 2's range eps < c1 T / n^2.
    #[arg(long, default_value_t = Settings::default().c1)]
    c1: f64,

    /// Local iterations T_local of dbdp-if (R = T / T_local global rounds).
    #[arg(long, default_value_t = Settings::default().t_local)]
    t_local: u64,

    /// DP-SGD clipping norm [default: the loss-gradient bound for logreg, 1 for the MLP].
    #[arg(long)]
    clip_norm: Option<f64>,

    /// Parameter ball radius every method projects onto [default: G0/lambda for logreg, 10 for
    /// the MLP].
    #[arg(long)]
    radius: Option<f64>,

    /// Fraction of rows held out for testing.
    #[arg(long, default_value_t = 0.2)]
    test_fraction: f64,

    /// Seed of the train/test split (not of any noise).
    #[arg(long, default_value_t = 0)]
    split_seed: u64,

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

fn list<T>(text: &str, what: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    let items: Vec<T> = text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(parse).collect::<Result<_>>()?;
    if items.is_empty() {
        bail!("--{what} is empty");
    }
    Ok(items)
}

fn epsilon(text: &str) -> Result<f64> {
    match text.parse::<f64>() {
        Ok(e) if e.is_finite() && e > 0.0 => Ok(e),
        _ => bail!("invalid epsilon '{text}': every epsilon must be a positive number"),
    }
}

/// Runs the experiment.
pub fn run(args: ErmArgs) -> Result<()> {
    let methods = list(&args.methods, "methods", |m| Ok(Method::parse(m)?))?;
    let epsilons = list(&args.epsilons, "epsilons", epsilon)?;
    if args.repeats == 0 {
        bail!("--repeats must be at least 1");
    }
    let options = CsvOptions {
        header: match args.header.as_str() {
            "yes" => HeaderMode::Present,
            "no" => HeaderMode::Absent,
            _ => HeaderMode::Auto,
        },
        label: match &args.label {
            None => LabelColumn::Last,
            Some(l) => l.parse::<usize>().map_or_else(|_| LabelColumn::Name(l.clone()), LabelColumn::Index),
        },
        missing: if args.missing == "drop" { MissingValues::Drop } else { MissingValues::Impute },
    };
    let table = load_csv(&args.dataset, &options)?;
    let (train, test) = table.split(args.test_fraction, args.split_seed)?;
    let scaler = UnitBallScaler::fit(&train);
    let (train, test) = (scaler.transform(&train), scaler.transform(&test));
    let settings = Settings {
        lambda: args.lambda,
        rounds: args.rounds,
        learning_rate: args.learning_rate,
        sample_rate: args.sample_rate,
        delta: args.delta,
        c: args.c,
        c1: args.c1,
        t_local: args.t_local,
        clip_norm: args.clip_norm,
        radius: args.radius,
    };
    let kind = if args.model == "mlp" { ModelKind::Mlp } else { ModelKind::Logreg };
    let problem = Problem::new(kind, train, test, settings)?;
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
    let bar = ProgressBar::new(experiment.total_runs() as u64).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} runs {msg} [{elapsed}<{eta}]").expect("static template"),
    );
    let report = experiment.run(|method, eps| {
        bar.set_message(format!("{method} eps {}", eps.map_or("-".into(), |e| e.to_string())));
        bar.inc(1);
    })?;
    bar.finish_and_clear();

    let csv = args.out.join("table.csv");
    std::fs::write(&csv, report.to_csv()).with_context(|| format!("cannot write {}", csv.display()))?;
    let json_path = args.out.join("report.json");
    let json = serde_json::to_string_pretty(&report)?;
    std::fs::write(&json_path, &json).with_context(|| format!("cannot write {}", json_path.display()))?;
    let plotted = report.rows.iter().any(|r| r.method.is_private() && r.runs > 0);
    if plotted {
        draw(&report, Metric::Accuracy, "Test accuracy", &args.out.join("accuracy.svg"))?;
        draw(&report, Metric::Gap, "Optimality gap", &args.out.join("gap.svg"))?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    let c = &report.constants;
    println!(
        "{}: {} training rows, {} test rows, {} features (intercept included), classes {}",
        args.dataset.display(),
        report.train_rows,
        report.test_rows,
        report.features,
        report.classes.join("/")
    );
    if table.missing.imputed_cells + table.missing.dropped_rows > 0 {
        println!(
            "missing values: {} cells imputed, {} rows dropped ({:?})",
            table.missing.imputed_cells, table.missing.dropped_rows, table.missing.by_column
        );
    }
    let opt = |v: Option<f64>| v.map_or("none (not convex)".to_string(), |v| format!("{v:.4}"));
    println!(
        "{} ({} parameters), lambda {}: G = {:.4} on the ball of radius {:.4}, L = {}, Delta = {}",
        report.model,
        report.parameters,
        report.settings.lambda,
        c.lipschitz,
        c.radius,
        opt(c.smoothness),
        opt(c.strong_convexity)
    );
    println!(
        "non-private: L* = {:.6}, test accuracy {:.2}%; delta = {:e}, {} run(s) per cell{}",
        report.l_star,
        100.0 * report.non_private_accuracy,
        report.settings.delta,
        args.repeats,
        if args.seed.is_some() { " (seeded: reproducible noise, not for release)" } else { "" }
    );
    println!();
    print!("{}", report.to_table());
    println!();
    let mut seen = Vec::new();
    for row in report.rows.iter().filter(|r| !r.notes.is_empty()) {
        if !seen.contains(&row.method) {
            seen.push(row.method);
            let at = row.epsilon.map_or(String::new(), |e| format!(" (epsilon {e})"));
            println!("{}{at}: {}", row.method, row.notes.join("; "));
        }
    }
    println!(
        "wrote {}, {}{}",
        csv.display(),
        json_path.display(),
        if plotted {
            format!(", {} and {}", args.out.join("accuracy.svg").display(), args.out.join("gap.svg").display())
        } else {
            String::new()
        }
    );
    Ok(())
}
