//! The DP training engine on Burn: models built from DP layers that expose per-example gradient
//! norms without a per-example loop, the DP step (clip, noise, divide by the expected lot size,
//! optimise), and the trainer that records every step in a privacy ledger.

pub mod activation;
pub mod backend;
pub mod bench;
pub mod checkpoint;
pub mod clipping;
pub mod conv2d;
pub mod error;
pub mod features;
pub mod image_source;
pub mod init;
pub mod linear;
pub mod loss;
pub mod model;
pub mod noise;
pub mod optimizer;
pub mod per_example;
pub mod pool;
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
