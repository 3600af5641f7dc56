//! The DP training library on Burn: DP layers as Burn modules whose per-example gradients come
//! from one backward pass (`nn`, `grad_sample`), what determines privacy (`privacy_config`) and
//! the mechanisms (`mechanism`), one DP step that owns the ledger (`step`), the backend
//! extensions the layers run on (`ops`), and what a Burn user adopts, all in `prelude`:
//! `PrivacyConfig`, `PrivacyEngine`, `DpOptimizer`, the DP layers, lot sources, checkpoints. The
//! dp-run crate (a run kept in a folder) and the `dptrain` app are built on this API alone.
//!
//! Per-example gradient norms of a batch of an ordinary Burn module built from DP layers:
//!
//! ```
//! use burn::module::Module;
//! use burn::tensor::{Tensor, TensorData};
//! use dp_engine::grad_sample::batch::BatchGrads;
//! use dp_engine::nn::{DpLinear, DpLinearConfig};
//!
//! #[derive(Module, Debug)]
//! struct Net {
//!     fc: DpLinear,
//! }
//!
//! let device = dp_engine::backend::cpu().device;
//! let net = Net { fc: DpLinearConfig::new(4, 3).init(&device) }.valid();
//! let x = Tensor::<2>::from_data(TensorData::new(vec![0.5f32; 8], [2, 4]), &device);
//! let (mut grads, _) = BatchGrads::compute(|| (net.fc.forward(x).powi_scalar(2).sum_dim(1).reshape([2]), ()))?;
//! let sq_norms = grads.sq_norms();
//! assert_eq!(sq_norms[0].dims(), [2]); // one squared norm per example
//! # Ok::<(), dp_engine::EngineError>(())
//! ```

pub mod activation;
pub mod allocation;
pub mod augmented_lots;
pub mod canaries;
pub mod classifier;
pub mod dp_checkpoint;
pub mod dp_optimizer;
pub mod error;
mod flex_host;
pub mod grad_sample;
mod host_buffers;
mod host_gemm;
pub mod host_memory;
pub mod init;
pub mod loss;
pub mod lr_schedule;
pub mod machine;
pub mod mechanism;
pub mod nn;
pub mod ops;
pub mod optimizer;
pub mod parameter_average;
pub mod phases;
pub mod plan;
pub mod prelude;
pub mod privacy;
pub mod privacy_config;
pub mod privacy_engine;
pub mod privacy_settings;
pub mod scatter_net;
pub mod selftest;
pub mod smoothing;
pub mod step;
mod stream_key_file;
pub mod weights;

// The device, clipping, noise and tensor helpers live in dp-kernels, which DP-ERM shares.
pub use dp_kernels::{backend, clipping, noise, tensor_io};

pub use backend::{DeviceChoice, SelectedDevice};
pub use error::{EngineError, Result};
pub use selftest::OpenDevice;
