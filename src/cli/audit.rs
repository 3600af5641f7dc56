//! `dptrain audit`: empirical lower bounds on the epsilon of a DP-ERM mechanism from the one-run
//! audit of Steinke, Nasr and Jagielski (NeurIPS 2023) or the classic many-run audit, beside the
//! epsilon the mechanism claims.

use super::erm::{epsilon, list};
use super::progress::Progress;
use super::table_args::{SettingsArgs, TableArgs};
use anyhow::Result;
use clap::Args;
use dp_accounting::Guarantee;
use dp_audit::{Audit, AuditReport, CanaryKind, Design};
use dp_data::TabularData;
use dp_erm::{Method, ModelKind};
use std::path::PathBuf;

/// Audit a mechanism: train it with m canaries, each included with probability 1/2, guess which
/// were in from their scores, and turn the correct guesses into a lower bound on the epsilon the
/// mechanism really has (at --confidence, for the stated --delta). A lower bound above the claimed
/// epsilon refutes the claim; a certified claim must never be exceeded.
///
/// Canaries: white-box (gradient and non-private: Dirac gradient canaries in DP-SGD, each on a
/// coordinate of its own at the clipping norm, scored by the released noisy sums of every step,
/// the tight audit of DP-SGD) or black-box (any method: out-of-distribution rows, each the unit
/// vector of a feature of its own that is zero in every real row, with a random label, scored by
/// minus their loss under the released model).
///
/// With --many-runs N: the classic audit instead. N trainings without and N with one canary (the
/// row along which the training rows vary least, black-box; one Dirac gradient canary,
/// white-box); a test "in when its score lies in an interval" chosen on the first half of each
/// world's runs; Clopper-Pearson bounds on the errors of the second halves. It can show large
/// epsilons (about ln(N / 7) with no errors) where one run with m canaries stops near ln(m / 9)
/// (4.7 with 1,000 canaries).
///
/// Examples (DP-SGD at certified epsilon 2, white-box, 5 audits of one training run each; then
/// dbdp-if at its claimed epsilon 7, 2 x 100,000 trainings, about 40 s):
///   dptrain audit --dataset data/tabular/breast_cancer.csv --label target --mechanism gradient
///     --epsilons 2 --canaries 1000 --sample-rate 1 --repeats 5
///   dptrain audit --dataset data/tabular/breast_cancer.csv --label target --mechanism dbdp-if
///     --c1 1e5 --epsilons 7 --many-runs 100000
#[derive(Args, Debug)]
#[command(allow_negative_numbers = true)]
pub struct AuditArgs {
    #[command(flatten)]
    table: TableArgs,

    #[command(flatten)]
    settings: SettingsArgs,

    /// The mechanisms, comma-separated: gradient, input, dbdp, dbdp-if, output, objective,
    /// non-private.
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

    /// Run the many-run audit with this many trainings per world (with and without the canary)
    /// instead of the one-run audit (--canaries and --repeats are then not used).
    #[arg(long)]
    many_runs: Option<usize>,

    /// Seed the canaries and the mechanism's noise (reproducible audits).
    #[arg(long)]
    seed: Option<u64>,

    /// Print the reports as one JSON array on stdout.
    #[arg(long)]
    json: bool,

    /// Also draw the lower bounds against the claimed epsilons to this SVG file.
    #[arg(long)]
    plot: Option<PathBuf>,
}

fn row(r: &AuditReport) -> String {
    let eps = r.epsilon.map_or("-".into(), |e| format!("{e}"));
    let claimed = if r.claimed_epsilon.is_finite() { format!("{:.4}", r.claimed_epsilon) } else { "inf".into() };
    let certified = if r.guarantee == Guarantee::Certified { claimed.clone() } else { "-".into() };
    let (evidence, bounds) = match &r.many_runs {
        Some(b) => (
            format!("{:>6}/{:<6} {:>6}/{:<6}", b.false_positives, b.counted, b.false_negatives, b.counted),
            format!("in if score in [{:.4e}, {:.4e})", b.lower, b.upper),
        ),
        None => {
            let best = r.runs.iter().max_by(|a, b| a.epsilon.total_cmp(&b.epsilon)).expect("at least one run");
            let bounds: Vec<String> = r.runs.iter().map(|b| format!("{:.3}", b.epsilon)).collect();
            (format!("{:>7}/{:<6}", best.correct, best.guesses), bounds.join(" "))
        }
    };
    let verdict = match (r.max_lower_bound > r.claimed_epsilon, r.guarantee) {
        (true, Guarantee::Certified) => "VIOLATED (accountant unsound?)",
        (true, _) => "claim refuted",
        (false, _) => "not refuted",
    };
    let refused = if r.refused_runs > 0 { format!(" ({} trainings refused)", r.refused_runs) } else { String::new() };
    format!(
        "{:<12} {:<9} {:>6} {:>9} {:<12} {:>9} {:>8.3} {} {:>7.3}  {:<16} {}{refused}\n",
        r.method.name(),
        match r.canary_kind {
            CanaryKind::WhiteBox => "white-box",
            CanaryKind::BlackBox => "black-box",
        },
        eps,
        claimed,
        r.guarantee.to_string(),
        certified,
        r.max_lower_bound,
        evidence,
        r.seconds,
        verdict,
        bounds
    )
}

/// Runs the audits.
pub fn run(args: AuditArgs) -> Result<()> {
    let methods = list(&args.mechanism, "mechanism", |m| Method::parse(m).map_err(anyhow::Error::from))?;
    let epsilons = list(&args.epsilons, "epsilons", epsilon)?;
    let canary_kind = |method: Method| match args.canary.as_deref() {
        Some("white-box") => CanaryKind::WhiteBox,
        Some(_) => CanaryKind::BlackBox,
        None if matches!(method, Method::Gradient | Method::NonPrivate) => CanaryKind::WhiteBox,
        None => CanaryKind::BlackBox,
    };
    let (_, train, test) = args.table.load()?;
    let kind = if args.model == "mlp" { ModelKind::Mlp } else { ModelKind::Logreg };
    let budgets = |method: Method| if method.is_private() { epsilons.clone() } else { vec![f64::INFINITY] };
    let design = match args.many_runs {
        Some(runs) => Design::ManyRuns { runs },
        None => Design::OneRun { canaries: args.canaries, repeats: args.repeats },
    };
    let audits: Vec<Audit> = methods
        .iter()
        .flat_map(|&method| budgets(method).into_iter().map(move |eps| (method, eps)))
        .map(|(method, epsilon)| Audit {
            kind,
            train: &train,
            test: &test,
            settings: args.settings.settings(),
            method,
            epsilon,
            design,
            canary_kind: canary_kind(method),
            confidence: args.confidence,
            seed: args.seed,
        })
        .collect();
    // Every audit is checked before the first trains, so a bad combination late in the list
    // costs nothing.
    for audit in &audits {
        audit.validate()?;
    }
    let bar = Progress::new(Some((audits.len() * design.trainings()) as u64), "trainings");
    let reports = audits.iter().map(|audit| audit.run(|| bar.inc())).collect::<dp_erm::Result<Vec<_>>>()?;
    bar.finish();
    if args.json {
        say!("{}", serde_json::to_string(&reports)?)?;
    } else {
        print_table(&args, &train, design, &reports)?;
    }
    // Drawn after the reports are out, so a plot that cannot be written loses no audit.
    if let Some(path) = &args.plot {
        let design = if args.many_runs.is_some() { "many-run" } else { "one-run" };
        let title = format!("{design} audits on {}", args.table.dataset.display());
        dp_audit::plot::draw(&reports, &title, path)?;
    }
    Ok(())
}

/// The human-readable report: a header, one row per audit, and what the confidence covers.
fn print_table(args: &AuditArgs, train: &TabularData, design: Design, reports: &[AuditReport]) -> Result<()> {
    let (what, evidence, note) = match design {
        Design::ManyRuns { runs } => (
            format!("{runs} trainings without and {runs} with one canary"),
            format!("{:>13} {:>13}", "false in", "false out"),
            "The test (in when the score lies in an interval) is chosen on the first half of each world's runs, \
             its errors counted on the second half."
                .to_string(),
        ),
        Design::OneRun { canaries, repeats } => (
            format!("{canaries} canaries per training run"),
            format!("{:>14}", "correct/guess"),
            format!(
                "Each run's bound holds at {}% confidence on its own; max lb is the largest of them recomputed at \
                 {}% (Bonferroni over {repeats} runs), so it and the verdict hold at {}%.",
                100.0 * args.confidence,
                100.0 * (1.0 - (1.0 - args.confidence) / repeats as f64),
                100.0 * args.confidence
            ),
        ),
    };
    say!(
        "{}: {} training rows; {what}; bounds at {}% confidence for delta {:e}{}",
        args.table.dataset.display(),
        train.len(),
        100.0 * args.confidence,
        args.settings.delta,
        if args.seed.is_some() { " (seeded)" } else { "" }
    )?;
    say!()?;
    say!(
        "{:<12} {:<9} {:>6} {:>9} {:<12} {:>9} {:>8} {evidence} {:>7}  {:<16} bound per run",
        "mechanism",
        "canary",
        "eps",
        "claimed",
        "label",
        "certified",
        "max lb",
        "s/run",
        "verdict"
    )?;
    for r in reports {
        put!("{}", row(r))?;
    }
    say!()?;
    say!("{note}")?;
    Ok(())
}
