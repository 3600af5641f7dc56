//! A Burn user's CNN on Fashion-MNIST, written the Burn way: burn-nn's layers (Conv2d, GroupNorm,
//! MaxPool2d, ReLU, Linear), the images as a Burn `Dataset` of items, a `Batcher`, a `DataLoader`,
//! burn-nn's `CrossEntropyLoss` and a training loop, without privacy. `burn_cnn.rs` is the same
//! program trained with DP-SGD to epsilon 3, resumable (docs/LIBRARY.md shows the lines that
//! differ; a test keeps them few).
//!
//! ```text
//! scripts/cargo-dptrain.sh build --release --locked --workspace --examples
//! BURN_DEVICE=flex /var/tmp/dp-target/release/examples/burn_cnn_plain
//! ```

use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{GroupNorm, GroupNormConfig, Linear, LinearConfig, PaddingConfig2d, Relu};
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};
use dp_data::{DatasetName, OwnData, Split};
use serde::Serialize;
use std::sync::Arc;

/// One image, normalised, and its class.
#[derive(Clone, Debug, Serialize)]
pub struct Item {
    pixels: Vec<f32>,
    label: u8,
}

/// Images [B, 1, 28, 28] and their classes [B].
#[derive(Clone, Debug)]
pub struct Batch {
    images: Tensor<4>,
    targets: Tensor<1, Int>,
}

/// Items into a batch on `device`.
pub struct ItemBatcher;

impl Batcher<Item, Batch> for ItemBatcher {
    fn batch(&self, items: Vec<Item>, device: &Device) -> Batch {
        let n = items.len();
        let targets: Vec<i64> = items.iter().map(|item| i64::from(item.label)).collect();
        let pixels: Vec<f32> = items.into_iter().flat_map(|item| item.pixels).collect();
        Batch {
            images: Tensor::from_data(TensorData::new(pixels, [n, 1, 28, 28]), device),
            targets: Tensor::from_data(TensorData::new(targets, [n]), device),
        }
    }
}

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

    /// The logits of images [B, 1, 28, 28].
    pub fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let x = self.pool.forward(self.relu.forward(self.norm1.forward(self.conv1.forward(x))));
        let x = self.pool.forward(self.relu.forward(self.norm2.forward(self.conv2.forward(x))));
        self.fc.forward(x.flatten(1, 3))
    }
}

/// A split of Fashion-MNIST (from where Debian's package puts it) as a Burn dataset of items.
fn items(split: Split) -> Result<InMemDataset<Item>, Box<dyn std::error::Error>> {
    let name = DatasetName::FashionMnist;
    let dir = name.default_dir().ok_or("Fashion-MNIST has no standard folder")?;
    let data = name.load(&dir, split, &OwnData::default())?;
    let item = |i| {
        let (pixels, labels) = data.batch(&[i]);
        Item { pixels, label: labels[0] }
    };
    Ok(InMemDataset::new((0..data.len()).map(item).collect()))
}

/// The share of `test` the model classifies correctly.
fn accuracy(model: &Cnn, test: &Arc<InMemDataset<Item>>, device: &Device) -> f64 {
    let loader = DataLoaderBuilder::new(ItemBatcher).batch_size(1000).set_device(device.clone()).build(test.clone());
    let model = model.valid();
    let (mut correct, mut seen) = (0, 0);
    for batch in loader.iter().flatten() {
        seen += batch.targets.dims()[0];
        let predicted = model.forward(batch.images).argmax(1).squeeze_dim::<1>(1);
        correct += predicted.equal(batch.targets).int().sum().into_scalar::<i64>();
    }
    correct as f64 / seen.max(1) as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = Device::default().autodiff();
    let (train, test) = (items(Split::Train)?, Arc::new(items(Split::Test)?));
    let mut model = Cnn::new(&device);
    let mut optimizer = SgdConfig::new().init();
    let loss = CrossEntropyLossConfig::new().init(&device);
    let loader = DataLoaderBuilder::new(ItemBatcher).batch_size(256).shuffle(7).set_device(device.clone()).build(train);
    for _epoch in 0..2 {
        for batch in loader.iter().flatten() {
            let logits = model.forward(batch.images);
            let grads = GradientsParams::from_grads(loss.forward(logits, batch.targets).backward(), &model);
            model = optimizer.step(0.5, model, grads);
        }
    }
    println!("test accuracy {:.1}%", accuracy(&model, &test, &device) * 100.0);
    Ok(())
}
