//! The datasets dptrain knows by name: where to find them and their public normalisation.

use crate::cifar10::load_cifar10;
use crate::error::Result;
use crate::image_dataset::{ImageDataset, Normalization};
use crate::mnist::load_mnist_format;
use crate::split::Split;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A named image dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DatasetName {
    /// Zalando's Fashion-MNIST (28x28 grey, 10 classes); Debian ships it.
    FashionMnist,
    /// LeCun's MNIST digits (28x28 grey, 10 classes).
    Mnist,
    /// CIFAR-10 (32x32 RGB, 10 classes), binary version.
    Cifar10,
}

impl DatasetName {
    /// Where the data is found when no folder is given (Debian's dataset-fashion-mnist package).
    pub fn default_dir(self) -> Option<PathBuf> {
        match self {
            DatasetName::FashionMnist => Some(PathBuf::from("/usr/share/datasets/fashion-mnist")),
            DatasetName::Mnist | DatasetName::Cifar10 => None,
        }
    }

    /// (channels, height, width) of the images.
    pub fn shape(self) -> [usize; 3] {
        match self {
            DatasetName::FashionMnist | DatasetName::Mnist => [1, 28, 28],
            DatasetName::Cifar10 => [3, 32, 32],
        }
    }

    /// Published per-channel statistics (not computed from the private data).
    pub fn normalization(self) -> Normalization {
        let (mean, std) = match self {
            DatasetName::FashionMnist => (vec![0.2860], vec![0.3530]),
            DatasetName::Mnist => (vec![0.1307], vec![0.3081]),
            DatasetName::Cifar10 => (vec![0.4914, 0.4822, 0.4465], vec![0.2470, 0.2435, 0.2616]),
        };
        Normalization { mean, std }
    }

    /// Whether a horizontally mirrored image keeps its label (clothes and CIFAR-10's objects
    /// do; digits do not), so that an augmented view may be flipped.
    pub fn mirrors_keep_labels(self) -> bool {
        !matches!(self, DatasetName::Mnist)
    }

    /// Loads one split from `dir`.
    pub fn load(self, dir: &Path, split: Split) -> Result<ImageDataset> {
        match self {
            DatasetName::FashionMnist | DatasetName::Mnist => load_mnist_format(dir, split, self.normalization()),
            DatasetName::Cifar10 => load_cifar10(dir, split, self.normalization()),
        }
    }
}
