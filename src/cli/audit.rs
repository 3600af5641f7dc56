//! `dptrain audit`: empirical lower bounds on the epsilon of a DP-ERM mechanism from the one-run
//! audit of Steinke, Nasr and Jagielski (NeurIPS 2023), beside the epsilon the mechanism claims.

use super::erm::{epsilon, list};
use super::table_args::{SettingsArgs, TableArgs};
use anyhow::Result;
use clap::Args;
use dp_accounting::Guarantee;
use dp_audit::{Audit, AuditReport, CanaryKind};
use dp_erm::{Method, ModelKind};
use indicatif::{ProgressBar, ProgressStyle};

/// Audit a mechanism: train it with m canaries, each included with probability 1/2, guess which
/// were in from their scores, and turn the correct guesses into a lower bound on the epsilon the
/// mechanism really has (at --confidence, for the stated --delta). A lower bound above the claimed
/// epsilon refutes the claim; a certified claim must never be exceeded.
///
/// Canaries: white-box (gradient and non-private: Dirac gradient canaries in DP-SGD, each on a
/// coordinate of its own at the clipping norm, scored by the released noisy sums of every step,
/// the tight audit of DP-SGD) or black-box (any method: mislabeled copies of training rows,
/// scored by minus their loss under the released model).
///
/// Example (DP-SGD at certified epsilon 2, white-box, 5 audits of one training run each):
///   dptrain audit --dataset data/tabular/breast_cancer.csv --label target --mechanism gradient
///     --epsilons 2 --canaries 1000 --sample-rate 1 --repeats 5
#[derive(Args, Debug)]
pub struct AuditArgs {
    #[command(flatten)]
    table: TableArgs,

    #[command(flatten)]
    settings: SettingsArgs,

    /// The mechanism: gradient, input, dbdp, dbdp-if, output, objective or non-private.
    #[arg(long)]
    mechanism: String,

    /// Model: logreg (softmax regression for more than two classes) or mlp.
    #[arg(long, default_value = "logreg", value_parser = ["logreg", "mlp"])]
    model: String,

    /// Comma-separated budgets epsilon the mechanism is run at.
    #[arg(long, default_value = "1", allow_hyphen_values = true)]
    epsilons: String,

    /// Canaries m per training run.
    #[arg(long, default_value_t = 1000)]
    canaries: usize,

    /// Canary kind: white-box or black-box [default: white-box for gradient and non-private,
    /// black-box otherwise].
    #[arg(long, value_parser = ["white-box", "black-box"])]
    canary: Option<String>,

    /// Confidence of each lower bound.
    #[arg(long, default_value_t = 0.95)]
    confidence: f64,

    /// Training runs per budget, each audited on its own.
    #[arg(long, default_value_t = 5)]
    repeats: usize,

    /// Seed the canaries and the mechanism's noise (reproducible audits).
    #[arg(long)]
    seed: Option<u64>,

    /// Print the reports as one JSON array on stdout.
    #[arg(long)]
    json: bool,
}

fn row(r: &AuditReport) -> String {
    let eps = r.epsilon.map_or("-".into(), |e| format!("{e}"));
    let claimed = if r.claimed_epsilon.is_finite() { format!("{:.4}", r.claimed_epsilon) } else { "inf".into() };
    let certified = if r.guarantee == Guarantee::Certified { claimed.clone() } else { "-".into() };
    let bounds: Vec<String> = r.runs.iter().map(|b| format!("{:.3}", b.epsilon)).collect();
    let best = r.runs.iter().max_by(|a, b| a.epsilon.total_cmp(&b.epsilon)).expect("at least one run");
    let verdict = match (r.max_lower_bound > r.claimed_epsilon, r.guarantee) {
        (true, Guarantee::Certified) => "VIOLATED (accountant unsound?)",
        (true, _) => "claim refuted",
        (false, _) => "not refuted",
    };
    format!(
        "{:<12} {:>6} {:>9} {:<12} {:>9} {:>8.3} {:>7}/{:<6} {:>7.2}  {:<16} {}\n",
        r.method.name(),
        eps,
        claimed,
        r.guarantee.to_string(),
        certified,
        r.max_lower_bound,
        best.correct,
        best.guesses,
        r.seconds,
        verdict,
        bounds.join(" ")
    )
}

/// Runs the audits.
pub fn run(args: AuditArgs) -> Result<()> {
    let method = Method::parse(&args.mechanism)?;
    let epsilons = list(&args.epsilons, "epsilons", epsilon)?;
    let canary_kind = match args.canary.as_deref() {
        Some("white-box") => CanaryKind::WhiteBox,
        Some(_) => CanaryKind::BlackBox,
        None if matches!(method, Method::Gradient | Method::NonPrivate) => CanaryKind::WhiteBox,
        None => CanaryKind::BlackBox,
    };
    let (_, train, test) = args.table.load()?;
    let kind = if args.model == "mlp" { ModelKind::Mlp } else { ModelKind::Logreg };
    let budgets: Vec<f64> = if method.is_private() { epsilons } else { vec![f64::INFINITY] };
    let bar = ProgressBar::new((budgets.len() * args.repeats) as u64).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} audited runs [{elapsed}<{eta}]").expect("static template"),
    );
    let mut reports = Vec::new();
    for &eps in &budgets {
        let audit = Audit {
            kind,
            train: &train,
            test: &test,
            settings: args.settings.settings(),
            method,
            epsilon: eps,
            canaries: args.canaries,
            canary_kind,
            confidence: args.confidence,
            repeats: args.repeats,
            seed: args.seed,
        };
        reports.push(audit.run(|| bar.inc(1))?);
    }
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string(&reports)?);
        return Ok(());
    }
    println!(
        "{}: {} training rows; {} {:?} canaries per run, each bound at {}% confidence for delta {:e}{}",
        args.table.dataset.display(),
        train.len(),
        args.canaries,
        canary_kind,
        100.0 * args.confidence,
        args.settings.delta,
        if args.seed.is_some() { " (seeded)" } else { "" }
    );
    println!();
    println!(
        "{:<12} {:>6} {:>9} {:<12} {:>9} {:>8} {:>14} {:>7}  {:<16} lower bound per run",
        "mechanism", "eps", "claimed", "label", "certified", "max lb", "correct/guess", "s/run", "verdict"
    );
    for r in &reports {
        print!("{}", row(r));
    }
    println!();
    println!(
        "Each run's bound holds at {}% confidence on its own; the max over {} runs holds at {:.0}% (union bound).",
        100.0 * args.confidence,
        args.repeats,
        100.0 * (1.0 - args.repeats as f64 * (1.0 - args.confidence)).max(0.0)
    );
    Ok(())
}
