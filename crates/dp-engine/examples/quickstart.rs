//! The README's example, compiled by CI as it is printed there: a logistic regression trained
//! with DP-SGD to a certified epsilon of 3 on a synthetic table, through Burn's own `Dataset` and
//! `Batcher`. `scripts/cargo-dptrain.sh build --release --workspace --examples`, then
//! `/var/tmp/dp-target/release/examples/quickstart` (the workspace's one build of Burn; `cargo run -p
//! dp-engine` alone would build Burn again with other features)

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::optim::SgdConfig;
use burn::tensor::{Device, Tensor, TensorData};
use dp_engine::lots::{correct, cross_entropy, evaluate, one_hot};
use dp_engine::prelude::*;

#[derive(Module, Debug)]
struct LogReg {
    fc: Linear, // burn-nn's Linear, with per-example gradients (dp_engine::nn)
}

/// Rows of 8 features and a class, batched the Burn way.
struct Rows;
impl Batcher<(Vec<f32>, usize), (Tensor<2>, Vec<usize>)> for Rows {
    fn batch(&self, rows: Vec<(Vec<f32>, usize)>, device: &Device) -> (Tensor<2>, Vec<usize>) {
        let n = rows.len();
        let (x, y): (Vec<Vec<f32>>, Vec<usize>) = rows.into_iter().unzip();
        (Tensor::from_data(TensorData::new(x.concat(), [n, 8]), device), y)
    }
}

/// Your private data's stand-in: rows whose features lean towards their class.
fn rows(range: std::ops::Range<usize>) -> InMemDataset<(Vec<f32>, usize)> {
    let row = |i: usize| ((0..8).map(|j| ((i * 8 + j) as f32).sin() + (i % 2) as f32 * 0.4 - 0.2).collect(), i % 2);
    InMemDataset::new(range.map(row).collect())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = DeviceChoice::Auto.open()?.device; // CUDA, a GPU through wgpu, or the CPU
    let loss = |model: &LogReg, (x, y): (Tensor<2>, Vec<usize>)| {
        let logits = model.fc.forward(x);
        let device = logits.device();
        let correct = Some(correct(logits.clone(), &y, &device));
        ExampleLosses { losses: cross_entropy(logits, one_hot(&y, 2, &device)), correct }
    };
    let (train, test) =
        (DatasetLots::new(rows(0..20_000), Rows, loss), DatasetLots::new(rows(20_000..22_000), Rows, loss));
    let mut model = LogReg { fc: LinearConfig::new(8, 2).init(&device) };

    // The DP part: what the run may spend, the optimiser made private, the loop.
    let privacy =
        PrivacyConfig::new(Gaussian).with_target_epsilon(3.0).with_delta(1e-5).with_lot_size(512).with_epochs(5.0);
    let mut dp = PrivacyEngine::new(privacy).make_private(&model, SgdConfig::new().init(), &train, &device)?;
    while !dp.is_done() {
        model = dp.step(model, &train, 0.5)?.0; // a Poisson lot: clip, add noise, record, SGD
    }

    let accuracy = evaluate(&model, &test, 512, &device)?.read().and_then(|(_, a)| a).unwrap_or(f64::NAN);
    println!("test accuracy {:.1}%, {}", accuracy * 100.0, dp.privacy()?); // ..., epsilon 3.0000 (delta 1e-5, rdp, certified)
    Ok(())
}
