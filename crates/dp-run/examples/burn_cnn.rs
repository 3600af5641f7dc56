//! A CNN written with burn-nn (Conv2d, GroupNorm, MaxPool2d, ReLU, Linear), trained with DP-SGD
//! to epsilon 3 on Fashion-MNIST, resumable: `burn_cnn_plain.rs` is the same program without
//! privacy, and the two differ in the lines docs/LIBRARY.md shows (a test keeps it so). Ctrl-C
//! it and run it again: it continues from its last sealed checkpoint.
//!
//! ```text
//! scripts/cargo-dptrain.sh build --release --locked --workspace --examples
//! /var/tmp/dp-target/release/examples/burn_cnn   # its run folder: runs/burn-cnn
//! ```

use burn::module::Module;
use burn::nn::Relu;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::optim::SgdConfig;
use burn::tensor::{Device, Int, Tensor, TensorData};
use dp_data::{DatasetName, ImageDataset, OwnData, Split};
use dp_engine::nn::{Conv2d, Conv2dConfig, GroupNorm, GroupNormConfig, Linear, LinearConfig, PaddingConfig2d};
use dp_run::prelude::*;

/// Two blocks of convolution, GroupNorm, ReLU and max pooling, then a linear layer.
#[derive(Module, Debug)]
pub struct Cnn {
    conv1: Conv2d,
    norm1: GroupNorm,
    conv2: Conv2d,
    norm2: GroupNorm,
    pool: MaxPool2d,
    relu: Relu,
    fc: Linear,
}

impl Cnn {
    /// The model on `device`.
    pub fn new(device: &Device) -> Self {
        let conv = |c_in, c_out| {
            Conv2dConfig::new([c_in, c_out], [3, 3]).with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1)).init(device)
        };
        Cnn {
            conv1: conv(1, 16),
            norm1: GroupNormConfig::new(4, 16).init(device),
            conv2: conv(16, 32),
            norm2: GroupNormConfig::new(4, 32).init(device),
            pool: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            relu: Relu::new(),
            fc: LinearConfig::new(32 * 7 * 7, 10).init(device),
        }
    }
}

impl ImageClassifier for Cnn {
    /// The logits of images [B, 1, 28, 28].
    fn logits(&self, x: Tensor<4>) -> Tensor<2> {
        let x = self.pool.forward(self.relu.forward(self.norm1.forward(self.conv1.forward(x))));
        let x = self.pool.forward(self.relu.forward(self.norm2.forward(self.conv2.forward(x))));
        self.fc.forward(x.flatten(1, 3))
    }
}

/// Fashion-MNIST's training and test sets, from where Debian's package puts them.
fn fashion_mnist() -> Result<(ImageDataset, ImageDataset), Box<dyn std::error::Error>> {
    let (name, own) = (DatasetName::FashionMnist, OwnData::default());
    let dir = name.default_dir().ok_or("Fashion-MNIST has no standard folder")?;
    Ok((name.load(&dir, Split::Train, &own)?, name.load(&dir, Split::Test, &own)?))
}

/// The images `indices` of `data` and their labels, on `device`.
fn batch(data: &ImageDataset, indices: &[usize], device: &Device) -> (Tensor<4>, Tensor<1, Int>) {
    let (pixels, labels) = data.batch(indices);
    let labels: Vec<i64> = labels.into_iter().map(i64::from).collect();
    let images = TensorData::new(pixels, [indices.len(), 1, 28, 28]);
    (Tensor::from_data(images, device), Tensor::from_data(TensorData::new(labels, [indices.len()]), device))
}

/// The share of `data` the model classifies correctly.
fn accuracy(model: &Cnn, data: &ImageDataset, device: &Device) -> f64 {
    let indices: Vec<usize> = (0..data.len()).collect();
    let correct = indices.chunks(1000).map(|chunk| {
        let (x, y) = batch(data, chunk, device);
        model.logits(x).argmax(1).squeeze_dim::<1>(1).equal(y).int().sum().into_scalar::<i64>()
    });
    correct.sum::<i64>() as f64 / data.len() as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = DeviceChoice::Auto.open()?.device;
    let (train, test) = fashion_mnist()?;
    let model = Cnn::new(&device);
    let optimizer = SgdConfig::new().init();
    let privacy = PrivacyConfig::new(Gaussian).with_target_epsilon(3.0).with_lot_size(256).with_epochs(2.0);
    let run =
        Run::new(RunFolder::open("runs/burn-cnn", None)?, privacy, 0.5, |m: &Cnn| Ok(accuracy(m, &test, &device)));
    let report = run.train(model, optimizer, &CrossEntropyLots { data: &train }, &device)?;
    println!("test accuracy {:.1}%, {}", report.test_accuracy * 100.0, report.privacy);
    Ok(())
}
