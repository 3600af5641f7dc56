//! The model families a user names on the command line.

use crate::logistic::Logistic;
use crate::mlp::Mlp;
use crate::model::Model;
use crate::softmax::Softmax;
use serde::Serialize;

/// Which model to fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// Logistic regression (softmax regression when the label has more than two classes).
    Logreg,
    /// One tanh hidden layer as wide as the input, softmax output.
    Mlp,
}

impl ModelKind {
    /// The model for `features` inputs and `classes` classes.
    pub fn build(self, features: usize, classes: usize) -> Box<dyn Model> {
        match (self, classes) {
            (ModelKind::Logreg, 2) => Box::new(Logistic { features }),
            (ModelKind::Logreg, _) => Box::new(Softmax { features, classes }),
            (ModelKind::Mlp, _) => Box::new(Mlp { features, classes }),
        }
    }
}
