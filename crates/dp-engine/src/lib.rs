//! The DP training engine on Burn: models built from DP layers that expose per-example gradient
//! norms without a per-example loop, the DP step (clip, noise, divide by the expected lot size,
//! smooth, optimise), and the trainer that records every step in a privacy ledger.
//!
//! Per-example gradient norms of a batch from one backward pass:
//!
//! ```
//! use burn::tensor::{Tensor, TensorData};
//! use dp_engine::{activation::Activation, features::Features, loss, tape::Tape, tensor_io::to_host};
//! use dp_engine::zoo::{ModelName, ModelSpec, Normalization, build};
//! use rand::SeedableRng;
//!
//! let device = dp_engine::backend::cpu().device;
//! let spec = ModelSpec { name: ModelName::Logreg, activation: Activation::Tanh, hidden: None, normalization: Normalization::None };
//! let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0);
//! let model = build(spec, [1, 2, 2], 3, &mut rng, &device)?;
//! let x = Tensor::<4>::from_data(TensorData::new(vec![0.5f32; 8], [2, 1, 2, 2]), &device);
//! let mut tape = Tape::new(&device);
//! let logits = model.forward(Features::Image(x), Some(&mut tape))?;
//! let grads = loss::summed_cross_entropy(logits, loss::one_hot(&[0, 2], 3, &device)).backward();
//! let mut layers = model.per_example(tape.layer_gradients(&grads)?);
//! let sq_norms = to_host(&layers[0].sq_norms());
//! assert_eq!(sq_norms.len(), 2); // one squared norm per example
//! # Ok::<(), dp_engine::EngineError>(())
//! ```

pub mod activation;
pub mod allocation;
pub mod backend;
pub mod bench;
pub mod canaries;
pub mod checkpoint;
pub mod clipping;
pub mod conv2d;
pub mod error;
pub mod features;
pub mod grad_sample;
pub mod image_source;
pub mod init;
pub mod linear;
pub mod loss;
pub mod model;
pub mod nn;
pub mod noise;
pub mod optimizer;
pub mod per_example;
pub mod pool;
pub mod smoothing;
pub mod step;
pub mod tape;
pub mod tensor_io;
pub mod train_config;
pub mod trainer;
pub mod zoo;

pub use backend::{DeviceChoice, SelectedDevice};
pub use error::{EngineError, Result};
pub use model::Model;
pub use zoo::ModelName;
