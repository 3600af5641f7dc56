//! The DP training library on Burn: DP layers as Burn modules whose per-example gradients come
//! from one backward pass ([`nn`], [`grad_sample`]), what determines privacy and the mechanisms
//! ([`privacy`]), the DP step that owns the ledger ([`step`]) over lots from the user's data
//! ([`lots`]), the entry point a Burn user adopts ([`engine`]: `PrivacyEngine` and the
//! `DpOptimizer` it gives), checkpoints ([`checkpoint`]), PyTorch weights ([`weights`]), the
//! backend extensions the layers run on ([`ops`], [`host`]) and a device self-test
//! ([`selftest`]); the types a user adopts are in [`prelude`]. The dp-run crate (a run kept in a
//! folder) and the `dptrain` app are built on this API alone.
//!
//! Per-example gradient norms of a batch of an ordinary Burn module built from DP layers:
//!
//! ```
//! use burn::module::Module;
//! use burn::tensor::{Tensor, TensorData};
//! use dp_engine::grad_sample::batch::BatchGrads;
//! use dp_engine::nn::{Linear, LinearConfig};
//!
//! #[derive(Module, Debug)]
//! struct Net {
//!     fc: Linear,
//! }
//!
//! let device = dp_engine::backend::cpu().device;
//! let net = Net { fc: LinearConfig::new(4, 3).init(&device) }.valid();
//! let x = Tensor::<2>::from_data(TensorData::new(vec![0.5f32; 8], [2, 4]), &device);
//! let (mut grads, _) = BatchGrads::compute(|| (net.fc.forward(x).powi_scalar(2).sum_dim(1).reshape([2]), ()))?;
//! let sq_norms = grads.sq_norms();
//! assert_eq!(sq_norms[0].dims(), [2]); // one squared norm per example
//! # Ok::<(), dp_engine::EngineError>(())
//! ```

#![warn(missing_docs)]

pub mod checkpoint;
pub mod engine;
pub mod error;
pub mod grad_sample;
pub mod host;
pub mod lots;
pub mod nn;
pub mod ops;
pub mod optim;
pub mod prelude;
pub mod privacy;
pub mod selftest;
pub mod step;
pub mod weights;

// The device, clipping, noise and tensor helpers live in dp-kernels, which DP-ERM shares: the
// device choice is part of this API, the rest is the engine's own (`Clipping` is a privacy setting).
pub use dp_kernels::backend;
use dp_kernels::{clipping, noise, tensor_io};

pub use backend::{DeviceChoice, SelectedDevice};
pub use error::{EngineError, Result};
pub use selftest::OpenDevice;
