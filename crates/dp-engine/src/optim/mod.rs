//! The update side of a run, after the privatised gradient: the update rules (SGD, Adam, AdamW as
//! burn-optim builds them, [`UpdateRule`]), the learning-rate schedule and the parameter average
//! (post-processing: the same epsilon). The private optimiser wrapping them is
//! `engine::DpOptimizer`.

pub(crate) mod lr_schedule;
pub(crate) mod parameter_average;
pub(crate) mod rules;
pub use lr_schedule::LrSchedule;
pub use parameter_average::{ParameterAverage, checked_decay};
pub use rules::{OptimizerName, UpdateRule, optimizer, update_rule};
