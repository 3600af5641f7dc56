//! What a Burn user adopting DP needs, in one import (`use dp_engine::prelude::*;`): the DP
//! layers, the privacy configuration and its mechanisms, `PrivacyEngine` and the `DpOptimizer`
//! it gives, lot sources and per-example losses, checkpoints and their keys, the device, the
//! report and the error. Everything else is under named modules (`ops` for the backend
//! extensions, `grad_sample` for per-example gradients, `step` for the DP step's parts).

pub use crate::backend::{DeviceChoice, SelectedDevice};
pub use crate::classifier::{CrossEntropyLots, ImageClassifier};
pub use crate::dp_checkpoint::{DpCheckpoint, StreamKeys};
pub use crate::dp_optimizer::DpOptimizer;
pub use crate::error::EngineError;
pub use crate::loss::{correct, cross_entropy, one_hot};
pub use crate::mechanism::Mechanism;
pub use crate::mechanism::gaussian::Gaussian;
pub use crate::mechanism::laplacian_smoothing::LaplacianSmoothed;
pub use crate::mechanism::none::Unperturbed;
pub use crate::mechanism::optimized::Optimized;
pub use crate::mechanism::optimized_paper::OptimizedPaper;
pub use crate::nn::{
    DpConv2d, DpConv2dConfig, DpEmbedding, DpEmbeddingConfig, DpGroupNorm, DpGroupNormConfig, DpLayerNorm,
    DpLayerNormConfig, DpLinear, DpLinearConfig,
};
pub use crate::privacy_config::PrivacyConfig;
pub use crate::privacy_engine::PrivacyEngine;
pub use crate::selftest::OpenDevice;
pub use crate::step::dataset_lots::DatasetLots;
pub use crate::step::lot::{ExampleLosses, LotSource, evaluate};
pub use crate::weights::{load_weights, save_weights};
pub use dp_accounting::{Guarantee, PrivacyReport};
