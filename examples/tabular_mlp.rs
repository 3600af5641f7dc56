//! A Burn user's non-image model trained with DP through dp-engine as a library: an MLP with
//! LayerNorm over a table (Breast Cancer Wisconsin: 569 rows, 30 features, 2 classes), its rows
//! in a Burn `InMemDataset`, batched by a Burn `Batcher`, trained to a target epsilon. The DP
//! part is the privacy configuration, `make_private` with the dataset adapter, and the loop.
//!
//! ```text
//! scripts/tabular-data.sh          # -> data/tabular/breast_cancer.csv (from scikit-learn's wheel)
//! cargo run --release --example tabular_mlp [-- path/to/table.csv [CLASS,CLASS,...]]
//! ```

use anyhow::Context;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::optim::AdamConfig;
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor, TensorData};
use dp_data::tabular::{CsvOptions, TabularData, load_csv};
use dp_engine::lots::{correct, cross_entropy, evaluate, one_hot};
use dp_engine::prelude::*;
use std::path::PathBuf;

/// Hidden units: few, because under DP every parameter adds noise.
const HIDDEN: usize = 8;

/// An MLP with one LayerNorm'd hidden layer.
#[derive(Module, Debug)]
struct Mlp {
    hidden: Linear,
    norm: LayerNorm,
    out: Linear,
}

impl Mlp {
    fn new(features: usize, classes: usize, device: &Device) -> Self {
        Self {
            hidden: LinearConfig::new(features, HIDDEN).init(device),
            norm: LayerNormConfig::new(HIDDEN).init(device),
            out: LinearConfig::new(HIDDEN, classes).init(device),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.out.forward(relu(self.norm.forward(self.hidden.forward(x))))
    }
}

/// One row of the table: its features, log-scaled one by one (a per-row map that reads no other
/// row, so it costs no privacy), and its class.
#[derive(Clone, Debug, serde::Serialize)]
struct Row {
    features: Vec<f32>,
    label: usize,
}

/// The rows of `table`.
fn rows(table: &TabularData) -> Vec<Row> {
    let scale = |v: f64| (v.signum() * v.abs().ln_1p()) as f32;
    (0..table.len())
        .map(|i| Row { features: table.row(i).iter().map(|&v| scale(v)).collect(), label: table.labels[i] })
        .collect()
}

/// Rows into a feature matrix and their labels.
struct Rows;

impl Batcher<Row, (Tensor<2>, Vec<usize>)> for Rows {
    fn batch(&self, items: Vec<Row>, device: &Device) -> (Tensor<2>, Vec<usize>) {
        let (n, dim) = (items.len(), items.first().map_or(0, |r| r.features.len()));
        let labels = items.iter().map(|r| r.label).collect();
        let x = items.into_iter().flat_map(|r| r.features).collect();
        (Tensor::from_data(TensorData::new(x, [n, dim]), device), labels)
    }
}

fn main() -> anyhow::Result<()> {
    let path = std::env::args().nth(1).map_or_else(|| PathBuf::from("data/tabular/breast_cancer.csv"), PathBuf::from);
    // The classes are public input, declared: never read from the private rows.
    let classes = std::env::args().nth(2).unwrap_or_else(|| "malignant,benign".into());
    let options = CsvOptions { classes: Some(classes.split(',').map(String::from).collect()), ..CsvOptions::default() };
    let table =
        load_csv(&path, &options).with_context(|| format!("{} (run scripts/tabular-data.sh first)", path.display()))?;
    let (train, test) = table.split(0.2, 7)?;
    let classes = table.classes.len();
    let device = DeviceChoice::Auto.open()?;
    let loss = move |model: &Mlp, (x, labels): (Tensor<2>, Vec<usize>)| {
        let logits = model.forward(x);
        let device = logits.device();
        let correct = Some(correct(logits.clone(), &labels, &device));
        ExampleLosses { losses: cross_entropy(logits, one_hot(&labels, classes, &device)), correct }
    };
    let (train_lots, test_lots) = (
        DatasetLots::new(InMemDataset::new(rows(&train)), Rows, loss),
        DatasetLots::new(InMemDataset::new(rows(&test)), Rows, loss),
    );
    let mut model = Mlp::new(table.dim, classes, &device.device);

    // The DP part: what the run may spend, the optimiser wrapped, the loop.
    let privacy =
        PrivacyConfig::new(Gaussian).with_target_epsilon(2.0).with_delta(1e-3).with_lot_size(128).with_epochs(40.0);
    let mut dp =
        PrivacyEngine::new(privacy).make_private(&model, AdamConfig::new().init(), &train_lots, &device.device)?;
    while !dp.is_done() {
        model = dp.step(model, &train_lots, 0.1)?.0;
    }

    let (_, accuracy) = evaluate(&model, &test_lots, 256, &device.device)?.read().context("an empty test set")?;
    println!(
        "MLP + LayerNorm on {} ({} training rows, {} steps on {}): test accuracy {:.2}%, {}",
        path.display(),
        train.len(),
        dp.steps_taken(),
        device.name,
        accuracy.context("the loss gives no accuracy")? * 100.0,
        dp.privacy()?
    );
    Ok(())
}
