//! dp-train as a library: a small residual CNN with GroupNorm, defined here as an ordinary Burn
//! module built from dp-train's DP layers, trained with DP-SGD on Fashion-MNIST to a target
//! epsilon of 3 on the best device available. Prints the test accuracy and the epsilon spent
//! with its guarantee label.
//!
//! Run: cargo run --release --example residual_fashion
//! (Fashion-MNIST from Debian's dataset-fashion-mnist package, or set FASHION_MNIST_DIR.)

use anyhow::Context;
use burn::module::Module;
use burn::optim::SgdConfig;
use burn::optim::momentum::MomentumConfig;
use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use dp_data::{DatasetName, Split};
use dp_engine::lots::image_accuracy;
use dp_engine::prelude::*;
use std::time::Instant;

/// conv -> GroupNorm -> ReLU -> conv -> GroupNorm, added to its input, then ReLU.
#[derive(Module, Debug)]
struct ResidualBlock {
    conv1: Conv2d,
    norm1: GroupNorm,
    conv2: Conv2d,
    norm2: GroupNorm,
}

impl ResidualBlock {
    fn new(channels: usize, device: &burn::tensor::Device) -> Self {
        let conv = || {
            Conv2dConfig::new([channels, channels], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_bias(false)
        };
        Self {
            conv1: conv().init(device),
            norm1: GroupNormConfig::new(4, channels).init(device),
            conv2: conv().init(device),
            norm2: GroupNormConfig::new(4, channels).init(device),
        }
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let h = relu(self.norm1.forward(self.conv1.forward(x.clone())));
        relu(x + self.norm2.forward(self.conv2.forward(h)))
    }
}

/// 28x28 -> stem (stride 2, 14x14x16) -> block -> down (stride 2, 7x7x32) -> block -> head.
#[derive(Module, Debug)]
struct ResNet {
    stem: Conv2d,
    stem_norm: GroupNorm,
    block1: ResidualBlock,
    down: Conv2d,
    down_norm: GroupNorm,
    block2: ResidualBlock,
    head: Linear,
}

impl ResNet {
    fn new(device: &burn::tensor::Device) -> Self {
        let strided = |c_in, c_out| {
            Conv2dConfig::new([c_in, c_out], [3, 3])
                .with_stride([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
        };
        Self {
            stem: strided(1, 16).init(device),
            stem_norm: GroupNormConfig::new(4, 16).init(device),
            block1: ResidualBlock::new(16, device),
            down: strided(16, 32).init(device),
            down_norm: GroupNormConfig::new(4, 32).init(device),
            block2: ResidualBlock::new(32, device),
            head: LinearConfig::new(32 * 7 * 7, 10).init(device),
        }
    }
}

impl ImageClassifier for ResNet {
    fn logits(&self, x: Tensor<4>) -> Tensor<2> {
        let h = relu(self.stem_norm.forward(self.stem.forward(x)));
        let h = self.block1.forward(h);
        let h = relu(self.down_norm.forward(self.down.forward(h)));
        let h = self.block2.forward(h);
        self.head.forward(h.flatten(1, 3))
    }
}

fn main() -> anyhow::Result<()> {
    let device = DeviceChoice::Auto.open()?;
    let fashion = DatasetName::FashionMnist;
    let dir = fashion.default_dir().context("Fashion-MNIST has a standard location")?;
    let own = dp_data::OwnData::default();
    let (train, test) = (fashion.load(&dir, Split::Train, &own)?, fashion.load(&dir, Split::Test, &own)?);
    let source = CrossEntropyLots { data: &train };
    let mut model = ResNet::new(&device.device);

    // The user's own burn-optim optimiser, wrapped so that every step is a DP step.
    let sgd = SgdConfig::new().with_momentum(Some(MomentumConfig::new().with_momentum(0.9).with_dampening(0.0)));
    let privacy =
        PrivacyConfig::new(Gaussian).with_target_epsilon(3.0).with_delta(1e-5).with_lot_size(512).with_epochs(4.0);
    let mut dp = PrivacyEngine::new(privacy).make_private(&model, sgd.init(), &source, &device.device)?;
    println!(
        "residual GroupNorm CNN on {}: noise multiplier {:.3}, {} steps planned, {}",
        device.name,
        dp.noise_multiplier().unwrap_or(0.0),
        dp.planned_steps(),
        dp.planned_privacy().planned()
    );
    for note in dp.notes() {
        println!("note: {note}");
    }

    let started = Instant::now();
    let steps_per_epoch = (train.len() / 512) as u64;
    while !dp.is_done() {
        model = dp.step(model, &source, 0.5)?.0;
        if dp.steps_taken() % steps_per_epoch == 0 {
            let accuracy = image_accuracy(&model, &test, &device.device)?;
            println!("step {}: test accuracy {:.2}%, {}", dp.steps_taken(), accuracy * 100.0, dp.privacy()?);
        }
    }
    let accuracy = image_accuracy(&model, &test, &device.device)?;
    println!(
        "test accuracy {:.2}% | {} | {} steps in {:.1} s",
        accuracy * 100.0,
        dp.privacy()?,
        dp.steps_taken(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
