//! Differentially private empirical risk minimization on tabular data: the input-perturbation
//! method of Kang et al. (seeds 000/001), DBDP-ERM and its influence-function variant (seed 003),
//! all labelled `paper-bound`, and the certified baselines the papers compare against (DP-SGD with
//! RDP accounting, output perturbation, objective perturbation), with the papers' experiment
//! (accuracy and optimality gap over epsilon) as one call. Pure Rust in f64: the models have at
//! most a few thousand parameters. No Burn.

pub mod constants;
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
pub mod softmax;
pub mod solver;

pub use error::{ErmError, Result};
pub use experiment::{Experiment, ExperimentReport, Row};
pub use methods::{Method, Outcome, Problem, Settings};
pub use model_kind::ModelKind;
