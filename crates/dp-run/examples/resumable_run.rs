//! A Burn user's DP training kept in a run folder: killed at any moment (Ctrl-C, `kill -9`, a
//! lost machine), it resumes where its last sealed checkpoint left it and ends with the report
//! and metrics an uninterrupted run would have written. The model is a logistic regression on
//! a synthetic two-class table of 4x4 "images"; the run part is the folder, the options and
//! `Run` (six lines where a plain DP loop has four).
//!
//! ```text
//! cargo run --release -p dp-run --example resumable_run -- runs/resumable          # Ctrl-C it
//! cargo run --release -p dp-run --example resumable_run -- runs/resumable --resume
//! ```
//!
//! Built with Burn's CUDA or wgpu backends on a machine whose GPU cannot open, resume with
//! `BURN_DEVICE=flex` in the environment: Burn 0.22 restores the optimiser's state on its default
//! device (the crate's documentation says more).

use burn::module::Module;
use burn::optim::SgdConfig;
use burn::tensor::Tensor;
use dp_data::{ChaChaState, ImageDataset};
use dp_engine::Result;
use dp_engine::lots::image_accuracy;
use dp_run::prelude::*;
use std::path::Path;

/// A logistic regression over the 16 pixels.
#[derive(Module, Debug)]
pub struct LogReg {
    fc: Linear,
}

impl ImageClassifier for LogReg {
    fn logits(&self, x: Tensor<4>) -> Tensor<2> {
        self.fc.forward(x.flatten(1, 3))
    }
}

impl LogReg {
    /// The model with seeded initial weights: a resumed process builds the same model a killed
    /// one did.
    pub fn new(device: &burn::tensor::Device) -> Self {
        dp_engine::nn::init::seeded(
            LogReg { fc: LinearConfig::new(16, 2).init(device) },
            &mut ChaChaState::new(Some(7), 2).restore(),
        )
    }
}

/// `n` examples of two classes whose pixels lean one way or the other (a fixed pseudo-random
/// pattern: the same table in every process).
pub fn table(n: usize, offset: usize) -> Result<ImageDataset> {
    let labels: Vec<u8> = (0..n).map(|i| u8::from((i + offset).is_multiple_of(3))).collect();
    let wobble = |i: usize, p: usize| (((i + offset) * 16 + p) as f32 * 0.618).sin();
    let pixels = (0..n * 16).map(|k| wobble(k / 16, k % 16) + if labels[k / 16] == 1 { 0.4 } else { -0.4 });
    Ok(ImageDataset::from_features(pixels.collect(), labels, [1, 4, 4], 2)?)
}

/// Trains (or, with `resume`, continues) the seeded run in `dir`, telling `observe` of each
/// event; `options` say where it stops and what interrupts it.
pub fn train(dir: &Path, resume: bool, options: RunOptions, observe: impl FnMut(&Event)) -> Result<RunReport> {
    let device = dp_engine::backend::cpu().device;
    let (train, test) = (table(2000, 0)?, table(500, 2000)?);
    let model = LogReg::new(&device);
    let privacy = PrivacyConfig::new(Gaussian).with_noise_multiplier(1.0).with_lot_size(100).with_epochs(5.0);

    // The run: a folder (fresh with its seed, or resumed), the options, and the run itself.
    let folder = if resume { RunFolder::resume(dir)? } else { RunFolder::fresh(dir, Some(7))? };
    let options = RunOptions { checkpoint_every: 5, ..options };
    Run::new(folder, privacy, 0.5, |model: &LogReg| image_accuracy(model, &test, &device))
        .with_options(options)
        .observe(observe)
        .train(model, SgdConfig::new().init(), &CrossEntropyLots { data: &train }, &device)
}

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: resumable_run RUN_DIR [--resume]");
        return std::process::ExitCode::from(2);
    };
    let resume = args.next().as_deref() == Some("--resume");
    let options = RunOptions { interrupt: Some(dp_run::interrupt::install()), ..RunOptions::default() };
    match train(Path::new(&dir), resume, options, |_| {}) {
        Ok(report) => {
            println!(
                "accuracy {:.2}% at {} after {} steps",
                report.test_accuracy * 100.0,
                report.privacy,
                report.steps
            );
            if report.interrupted {
                println!("interrupted: continue with --resume");
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
