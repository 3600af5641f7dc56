//! Data for DP training: MNIST-format IDX files (raw or .gz), CIFAR-10 binaries, a user's own
//! image folders and CSV tables loaded with errors that name the file, published normalisation constants, and lot samplers (Poisson by
//! default) driven by a ChaCha20 generator keyed from the OS.

#![warn(missing_docs)]

pub mod augment;
pub mod catalog;
pub mod cifar10;
pub mod error;
pub mod idx;
pub mod image_dataset;
pub mod image_folder;
pub mod jpeg;
pub mod memory;
pub mod mnist;
pub mod rng_state;
pub mod safe_files;
pub mod sampler;
pub mod split;
pub mod table_dataset;
pub mod tabular;
pub mod unit_ball;

pub use augment::{CropFlip, ViewDraw};
pub use catalog::{DatasetName, OwnData};
pub use error::{DataError, Result};
pub use image_dataset::{ImageDataset, Normalization};
pub use rng_state::{ChaChaPosition, ChaChaState, SecretKey};
pub use sampler::{LotSampler, SamplerPosition, Sampling};
pub use split::Split;
pub use tabular::{CsvOptions, HeaderMode, LabelColumn, MissingValues, TabularData, load_csv};
pub use unit_ball::UnitBallScaler;
