//! The datasets dptrain knows by name (where to find them, their public normalisation), and a
//! user's own: an image folder or a CSV table, in a folder the user gives.

use crate::cifar10::load_cifar10;
use crate::error::{DataError, Result};
use crate::image_dataset::{ImageDataset, Normalization};
use crate::image_folder::{class_names, load_image_folder};
use crate::mnist::load_mnist_format;
use crate::split::Split;
use crate::table_dataset::load_table;
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
    /// A user's images: `train/` (and `test/`) of the data folder, one folder per class, PNG or
    /// JPEG, resized to [`OwnData::image_shape`] (`image_folder`).
    ImageFolder,
    /// A user's CSV table: `train.csv` (and `test.csv`) of the data folder, numeric features
    /// and a label column (`table_dataset`).
    Csv,
}

/// How a user's own data is read (the named datasets ignore it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnData {
    /// (channels, height, width) images are resized to.
    pub image_shape: [usize; 3],
    /// The CSV label column: a header name or a 0-based index (None: the last column).
    pub label: Option<String>,
    /// The CSV table's classes in label order, declared (public input: never read from the
    /// rows); a table is refused without them.
    pub classes: Option<Vec<String>>,
}

impl Default for OwnData {
    fn default() -> Self {
        Self { image_shape: [3, 32, 32], label: None, classes: None }
    }
}

impl DatasetName {
    /// Where the data is found when no folder is given (Debian's dataset-fashion-mnist package).
    pub fn default_dir(self) -> Option<PathBuf> {
        match self {
            DatasetName::FashionMnist => Some(PathBuf::from("/usr/share/datasets/fashion-mnist")),
            DatasetName::Mnist | DatasetName::Cifar10 | DatasetName::ImageFolder | DatasetName::Csv => None,
        }
    }

    /// True for a user's own data (read from the folder given, never fetched).
    pub fn is_own(self) -> bool {
        matches!(self, DatasetName::ImageFolder | DatasetName::Csv)
    }

    /// (channels, height, width) of a named dataset's images (None: a user's own, whose shape
    /// is their files').
    pub fn shape(self) -> Option<[usize; 3]> {
        match self {
            DatasetName::FashionMnist | DatasetName::Mnist => Some([1, 28, 28]),
            DatasetName::Cifar10 => Some([3, 32, 32]),
            DatasetName::ImageFolder | DatasetName::Csv => None,
        }
    }

    /// Published per-channel statistics (not computed from the private data); None for a
    /// user's own data (images are scaled with `image_folder::NORMALIZATION`, tables not at all).
    pub fn normalization(self) -> Option<Normalization> {
        let (mean, std) = match self {
            DatasetName::FashionMnist => (vec![0.2860], vec![0.3530]),
            DatasetName::Mnist => (vec![0.1307], vec![0.3081]),
            DatasetName::Cifar10 => (vec![0.4914, 0.4822, 0.4465], vec![0.2470, 0.2435, 0.2616]),
            DatasetName::ImageFolder | DatasetName::Csv => return None,
        };
        Some(Normalization { mean, std })
    }

    /// Whether a horizontally mirrored image keeps its label (clothes and CIFAR-10's objects
    /// do; digits do not; a user's own images are not assumed to), so that an augmented view
    /// may be flipped.
    pub fn mirrors_keep_labels(self) -> bool {
        matches!(self, DatasetName::FashionMnist | DatasetName::Cifar10)
    }

    /// Loads one split from `dir` (a user's own data read as `own` says).
    pub fn load(self, dir: &Path, split: Split, own: &OwnData) -> Result<ImageDataset> {
        let part = |name: &str| {
            let path = dir.join(name);
            match (path.exists(), split) {
                (true, _) => Ok(path),
                (false, Split::Test) => Err(DataError::corrupt(
                    dir,
                    format!("holds no {name}: add one, or hold out training examples for validation"),
                )),
                (false, Split::Train) => Err(DataError::corrupt(dir, format!("holds no {name} (the training data)"))),
            }
        };
        let (label, classes) = (own.label.as_deref(), own.classes.as_deref());
        let published = || {
            self.normalization().ok_or_else(|| DataError::InvalidParameter {
                name: "dataset",
                reason: format!("{self:?} has no published statistics"),
            })
        };
        match (self, split) {
            (DatasetName::FashionMnist | DatasetName::Mnist, _) => load_mnist_format(dir, split, published()?),
            (DatasetName::Cifar10, _) => load_cifar10(dir, split, published()?),
            (DatasetName::ImageFolder, Split::Train) => {
                Ok(load_image_folder(&part("train")?, own.image_shape, None)?.0)
            }
            (DatasetName::ImageFolder, Split::Test) => {
                let classes = class_names(&part("train")?)?;
                Ok(load_image_folder(&part("test")?, own.image_shape, Some(&classes))?.0)
            }
            (DatasetName::Csv, Split::Train) => Ok(load_table(&part("train.csv")?, label, classes, None)?.0),
            (DatasetName::Csv, Split::Test) => {
                let columns = load_table(&part("train.csv")?, label, classes, None)?.1;
                Ok(load_table(&part("test.csv")?, label, classes, Some(&columns))?.0)
            }
        }
    }
}
