//! The flags `dptrain erm` and `dptrain audit` share: where the table comes from and how it is
//! split and scaled, and the DP-ERM hyperparameters.

use anyhow::Result;
use clap::Args;
use dp_data::{CsvOptions, HeaderMode, LabelColumn, MissingValues, TabularData, UnitBallScaler, load_csv};
use dp_erm::Settings;
use std::path::PathBuf;

/// The CSV table and its train/test split.
#[derive(Args, Debug)]
pub struct TableArgs {
    /// The CSV table.
    #[arg(long)]
    pub dataset: PathBuf,

    /// The label column: a header name or a 0-based index [default: the last column].
    #[arg(long)]
    pub label: Option<String>,

    /// The classes, in label order, as the labels are written (required: they are public input,
    /// never read from the private rows; a row labelled otherwise is refused).
    #[arg(long, value_name = "NAME,NAME,...", value_delimiter = ',', required = true)]
    pub classes: Vec<String>,

    /// Whether the first line is a header: auto, yes or no.
    #[arg(long, default_value = "auto", value_parser = ["auto", "yes", "no"])]
    pub header: String,

    /// Rows with missing feature values ("", "?", "NA"): impute (column mean or mode) or drop.
    #[arg(long, default_value = "impute", value_parser = ["impute", "drop"])]
    pub missing: String,

    /// Fraction of rows held out for testing.
    #[arg(long, default_value_t = 0.2)]
    pub test_fraction: f64,

    /// Seed of the train/test split (not of any noise).
    #[arg(long, default_value_t = 0)]
    pub split_seed: u64,
}

impl TableArgs {
    /// The whole table (for its missing-value report) and the scaled train and test rows.
    pub fn load(&self) -> Result<(TabularData, TabularData, TabularData)> {
        let options = CsvOptions {
            header: match self.header.as_str() {
                "yes" => HeaderMode::Present,
                "no" => HeaderMode::Absent,
                _ => HeaderMode::Auto,
            },
            label: match &self.label {
                None => LabelColumn::Last,
                Some(l) => l.parse::<usize>().map_or_else(|_| LabelColumn::Name(l.clone()), LabelColumn::Index),
            },
            missing: if self.missing == "drop" { MissingValues::Drop } else { MissingValues::Impute },
            classes: Some(self.classes.clone()),
        };
        let table = load_csv(&self.dataset, &options)?;
        let (train, test) = table.split(self.test_fraction, self.split_seed)?;
        let scaler = UnitBallScaler::fit(&train);
        let (train, test) = (scaler.transform(&train), scaler.transform(&test));
        Ok((table, train, test))
    }
}

/// The DP-ERM hyperparameters.
#[derive(Args, Debug)]
pub struct SettingsArgs {
    /// delta of every guarantee.
    #[arg(long, default_value_t = Settings::default().delta)]
    pub delta: f64,

    /// L2 regularization lambda (the strong convexity Delta of logistic and softmax regression).
    #[arg(long, default_value_t = Settings::default().lambda)]
    pub lambda: f64,

    /// Iterations T of every iterative method.
    #[arg(long, default_value_t = Settings::default().rounds)]
    pub rounds: u64,

    /// Step size [default: 1/L for logreg, 0.5 for the MLP].
    #[arg(long)]
    pub learning_rate: Option<f64>,

    /// Sampling rate q (DBDP minibatches of qn rows; DP-SGD Poisson rate).
    #[arg(long, default_value_t = Settings::default().sample_rate)]
    pub sample_rate: f64,

    /// The papers' unspecified constant c in the noise formulas.
    #[arg(long, default_value_t = Settings::default().c)]
    pub c: f64,

    /// The unspecified constant c1 of DBDP Theorem 2's range eps < c1 T / n^2.
    #[arg(long, default_value_t = Settings::default().c1)]
    pub c1: f64,

    /// Local iterations T_local of dbdp-if (R = T / T_local global rounds).
    #[arg(long, default_value_t = Settings::default().t_local)]
    pub t_local: u64,

    /// DP-SGD clipping norm [default: the loss-gradient bound for logreg, 1 for the MLP].
    #[arg(long)]
    pub clip_norm: Option<f64>,

    /// Parameter ball radius every method projects onto [default: G0/lambda for logreg, 10 for
    /// the MLP].
    #[arg(long)]
    pub radius: Option<f64>,
}

impl SettingsArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> Settings {
        Settings {
            lambda: self.lambda,
            rounds: self.rounds,
            learning_rate: self.learning_rate,
            sample_rate: self.sample_rate,
            delta: self.delta,
            c: self.c,
            c1: self.c1,
            t_local: self.t_local,
            clip_norm: self.clip_norm,
            radius: self.radius,
        }
    }
}
