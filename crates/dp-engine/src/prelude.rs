//! The types a Burn user adopting DP needs, in one import (`use dp_engine::prelude::*;`): the DP
//! layers, the privacy configuration and its mechanisms, `PrivacyEngine` and the `DpOptimizer` it
//! gives, lot sources and per-example losses, checkpoints and their keys, the device and the
//! error. Types only: functions are named from their modules (`lots::{cross_entropy, evaluate}`,
//! `weights::load_weights`), so a glob import hides nothing of the user's or of std's.

pub use crate::backend::{DeviceChoice, SelectedDevice};
pub use crate::checkpoint::{DpCheckpoint, StreamKeys};
pub use crate::engine::{DpOptimizer, PrivacyEngine};
pub use crate::error::EngineError;
pub use crate::lots::{CrossEntropyLots, DatasetLots, ExampleLosses, ImageClassifier, LotSource};
pub use crate::nn::{
    Conv2d, Conv2dConfig, Embedding, EmbeddingConfig, GroupNorm, GroupNormConfig, LayerNorm, LayerNormConfig, Linear,
    LinearConfig, MaxPool2d, MaxPool2dConfig, PaddingConfig2d, Relu, Tanh,
};
pub use crate::privacy::PrivacyConfig;
pub use crate::privacy::mechanism::Mechanism;
pub use crate::privacy::mechanism::gaussian::Gaussian;
pub use crate::privacy::mechanism::laplacian_smoothing::LaplacianSmoothed;
pub use crate::privacy::mechanism::optimized::Optimized;
pub use crate::privacy::mechanism::optimized_paper::OptimizedPaper;
pub use crate::privacy::mechanism::unperturbed::Unperturbed;
pub use crate::selftest::OpenDevice;
pub use dp_accounting::{Guarantee, PrivacyReport};
