//! Inverse-Hessian products H^{-1} v at a fixed point (the influence function of Koh & Liang,
//! DBDP-ERM Algorithm 2 line 2). The Hessian is factored once (Cholesky) when it is small enough
//! to hold: exact for logistic and softmax regression, assembled column by column from
//! finite-difference Hessian-vector products for the MLP. Larger models (a softmax over many
//! classes included: its dense Hessian would be p^2 floats) solve each product by conjugate
//! gradient on Hessian-vector products.

use crate::error::{ErmError, Result};
use crate::linalg::{Cholesky, Matrix, dot};
use crate::objective::Objective;

/// Models with more parameters than this use conjugate gradient instead of a dense factor.
pub const DENSE_LIMIT: usize = 4096;
/// The most Hessian products one conjugate-gradient solve takes.
pub const CG_ITERATIONS: usize = 1000;

/// H^{-1} at one point.
#[derive(Debug, Clone)]
pub enum InverseHessian {
    /// A Cholesky factor of the (exact or assembled) Hessian.
    Factored(Cholesky),
    /// Conjugate gradient on Hessian-vector products at `theta`.
    ConjugateGradient {
        /// The point.
        theta: Vec<f64>,
    },
}

fn not_positive_definite() -> ErmError {
    ErmError::Numerical(
        "the Hessian is not positive definite at the pre-trained model (Eq. 14 assumes it is); raise Settings::lambda"
            .into(),
    )
}

/// The Hessian from `p` finite-difference Hessian-vector products, symmetrized.
fn assemble(objective: &Objective<'_>, theta: &[f64]) -> Matrix {
    let p = theta.len();
    let mut h = Matrix::scaled_identity(p, 0.0);
    for k in 0..p {
        let mut e = vec![0.0; p];
        e[k] = 1.0;
        for (r, v) in objective.hessian_vector(theta, &e).into_iter().enumerate() {
            h[(r, k)] += 0.5 * v;
            h[(k, r)] += 0.5 * v;
        }
    }
    h
}

impl InverseHessian {
    /// The inverse Hessian of `objective` at `theta`.
    pub fn at(objective: &Objective<'_>, theta: &[f64]) -> Result<Self> {
        if theta.len() > DENSE_LIMIT {
            return Ok(InverseHessian::ConjugateGradient { theta: theta.to_vec() });
        }
        let hessian = objective.hessian(theta).unwrap_or_else(|| assemble(objective, theta));
        hessian.cholesky().map(InverseHessian::Factored).ok_or_else(not_positive_definite)
    }

    /// H^{-1} v for the objective this was built from.
    pub fn solve(&self, objective: &Objective<'_>, v: &[f64]) -> Result<Vec<f64>> {
        match self {
            InverseHessian::Factored(c) => Ok(c.solve(v)),
            InverseHessian::ConjugateGradient { theta } => {
                conjugate_gradient(|p| objective.hessian_vector(theta, p), v, 1e-8, CG_ITERATIONS)
            }
        }
    }
}

/// Solves A x = b for symmetric positive definite A given as products; refuses negative
/// curvature (a Hessian that is not positive definite has no influence function).
pub fn conjugate_gradient(
    apply: impl Fn(&[f64]) -> Vec<f64>,
    b: &[f64],
    tolerance: f64,
    max_iter: usize,
) -> Result<Vec<f64>> {
    let mut x = vec![0.0; b.len()];
    let mut r = b.to_vec();
    let mut p = r.clone();
    let mut rr = dot(&r, &r);
    let target = tolerance * tolerance * rr;
    for _ in 0..max_iter {
        if rr <= target || rr == 0.0 {
            return Ok(x);
        }
        let ap = apply(&p);
        let curvature = dot(&p, &ap);
        if curvature <= 0.0 || !curvature.is_finite() {
            return Err(not_positive_definite());
        }
        let alpha = rr / curvature;
        crate::linalg::axpy(alpha, &p, &mut x);
        crate::linalg::axpy(-alpha, &ap, &mut r);
        let next = dot(&r, &r);
        p = r.iter().zip(&p).map(|(ri, pi)| ri + next / rr * pi).collect();
        rr = next;
    }
    Err(ErmError::Numerical(format!("conjugate gradient did not converge in {max_iter} iterations")))
}
