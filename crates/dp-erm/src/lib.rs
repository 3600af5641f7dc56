//! Differentially private empirical risk minimization on tabular data: the input-perturbation
//! method of Kang et al., DBDP-ERM and its influence-function variant (Kang et al., data perturbation),
//! all labelled `paper-bound`, and the certified baselines the papers compare against (DP-SGD with
//! RDP accounting, output perturbation, objective perturbation), with the papers' experiment
//! (accuracy and optimality gap over epsilon) as one call. The reference runs in f64 on the host
//! (exact inverse Hessians, influence functions and w_t need f64, which WGSL lacks); the training
//! loops of `input`, `dbdp` and `gradient` also run as f32 Burn tensors on the engine's devices.

#![warn(missing_docs)]

pub mod compute;
pub mod constants;
pub mod device_rows;
pub mod error;
pub mod experiment;
pub mod inverse_hessian;
pub mod linalg;
pub mod logistic;
pub mod methods;
pub mod mlp;
pub mod model;
pub mod model_kind;
pub mod objective;
pub mod plot;
pub mod rng;
pub mod row_sums;
pub mod softmax;
pub mod solver;

pub use compute::Compute;
pub use error::{ErmError, Result};
pub use experiment::{Experiment, ExperimentReport, Row};
pub use methods::{Method, Outcome, Problem, Settings};
pub use model_kind::ModelKind;
