//! The DP-ERM methods by name: what each is, its label and what it needs.

use crate::error::{ErmError, Result};
use serde::Serialize;
use std::fmt;

/// A DP-ERM method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Kang et al.'s input perturbation, Algorithm 1: perturb every row once, then full-batch gradient descent.
    Input,
    /// Kang et al.'s DBDP-ERM, Algorithm 1: perturb every row once, then minibatch SGD.
    Dbdp,
    /// Kang et al.'s DBDP-ERM, Algorithm 2: influence-function threshold, per-example noise (Theorem 2).
    DbdpIf,
    /// DP-SGD with Poisson sampling, clipping and RDP accounting (certified).
    Gradient,
    /// The minimizer plus Gaussian noise scaled to its sensitivity (certified, convex only).
    Output,
    /// Kifer et al. 2012 objective perturbation (certified, binary GLMs only).
    Objective,
    /// No privacy: L* and the accuracy ceiling.
    NonPrivate,
}

impl Method {
    /// Every method, in report order.
    pub const ALL: [Method; 7] = [
        Method::Input,
        Method::Dbdp,
        Method::DbdpIf,
        Method::Gradient,
        Method::Output,
        Method::Objective,
        Method::NonPrivate,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Input => "input",
            Method::Dbdp => "dbdp",
            Method::DbdpIf => "dbdp-if",
            Method::Gradient => "gradient",
            Method::Output => "output",
            Method::Objective => "objective",
            Method::NonPrivate => "non-private",
        }
    }

    /// The method named `name`.
    pub fn parse(name: &str) -> Result<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name).ok_or_else(|| ErmError::InvalidParameter {
            name: "method",
            reason: format!(
                "'{name}' is not one of {}",
                Method::ALL.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
            ),
        })
    }

    /// False for the non-private baseline, whose result does not depend on epsilon.
    pub fn is_private(self) -> bool {
        self != Method::NonPrivate
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
