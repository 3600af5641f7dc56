//! Where a step's examples come from: the [`LotSource`] trait (one loss per example, any model,
//! any label), a lot cut into physical batches ([`Batching`]), a Burn `Dataset` and `Batcher` as
//! one ([`DatasetLots`]), image classification ([`CrossEntropyLots`]), augmented views of every
//! example ([`AugmentedLots`]), and the per-example losses and evaluation those need.

pub(crate) mod augmented;
pub(crate) mod batching;
pub mod burn_loss;
pub(crate) mod classifier;
pub(crate) mod dataset;
pub(crate) mod loss;
pub(crate) mod source;
pub use augmented::{AUGMENT_STREAM, AugmentedLots, MAX_VIEWS, check_views};
pub use batching::Batching;
pub use classifier::{CrossEntropyLots, ImageClassifier, image_accuracy};
pub use dataset::{DatasetLots, classification};
pub use loss::{correct, cross_entropy, one_hot};
pub use source::{ExampleLosses, LotMetrics, LotSource, evaluate, lot_sum, mean_gradient};
