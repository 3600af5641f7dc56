//! Minimizers of the regularized empirical risk: accelerated projected gradient descent for the
//! strongly convex models (smoothness and strong convexity known), and gradient descent with
//! Armijo backtracking for the MLP. Both stop at a gradient-mapping norm below `tolerance`.

use crate::error::{ErmError, Result};
use crate::linalg::{norm, project_ball};

/// How to minimize.
#[derive(Debug, Clone, Copy)]
pub struct Minimizer {
    /// Smoothness L and strong convexity mu of the objective, when known (convex models).
    pub constants: Option<(f64, f64)>,
    /// Projection radius, if any.
    pub radius: Option<f64>,
    /// Stop when the gradient mapping is below this norm.
    pub tolerance: f64,
    /// Iteration cap.
    pub max_iterations: usize,
}

fn project(theta: &mut [f64], radius: Option<f64>) {
    if let Some(r) = radius {
        project_ball(theta, r);
    }
}

impl Minimizer {
    /// A minimizer of the objective whose value and gradient `f` returns, from `start`.
    pub fn minimize(&self, f: impl Fn(&[f64]) -> (f64, Vec<f64>), start: Vec<f64>) -> Result<Vec<f64>> {
        match self.constants {
            Some((l, mu)) => self.accelerated(|t| f(t).1, start, l, mu),
            None => self.backtracking(f, start),
        }
    }

    /// Nesterov's constant-momentum method for mu-strongly convex, L-smooth objectives.
    fn accelerated(&self, grad: impl Fn(&[f64]) -> Vec<f64>, start: Vec<f64>, l: f64, mu: f64) -> Result<Vec<f64>> {
        let kappa = (l / mu).sqrt();
        let momentum = (kappa - 1.0) / (kappa + 1.0);
        let (mut x, mut y) = (start.clone(), start);
        for _ in 0..self.max_iterations {
            let g = grad(&y);
            let mut next: Vec<f64> = y.iter().zip(&g).map(|(yi, gi)| yi - gi / l).collect();
            project(&mut next, self.radius);
            let mapping = l * norm(&next.iter().zip(&y).map(|(a, b)| a - b).collect::<Vec<_>>());
            if !mapping.is_finite() {
                return Err(ErmError::Numerical("the minimizer diverged (non-finite gradient)".into()));
            }
            y = next.iter().zip(&x).map(|(n, o)| n + momentum * (n - o)).collect();
            project(&mut y, self.radius);
            x = next;
            if mapping < self.tolerance {
                return Ok(x);
            }
        }
        Ok(x)
    }

    /// Projected gradient descent with Armijo backtracking (no constants needed).
    fn backtracking(&self, f: impl Fn(&[f64]) -> (f64, Vec<f64>), start: Vec<f64>) -> Result<Vec<f64>> {
        let mut theta = start;
        let mut step = 1.0;
        let (mut value, mut grad) = f(&theta);
        for _ in 0..self.max_iterations {
            loop {
                let mut next: Vec<f64> = theta.iter().zip(&grad).map(|(t, g)| t - step * g).collect();
                project(&mut next, self.radius);
                let moved: Vec<f64> = next.iter().zip(&theta).map(|(a, b)| a - b).collect();
                let (nv, ng) = f(&next);
                let decrease = crate::linalg::dot(&grad, &moved) + crate::linalg::dot(&moved, &moved) / (2.0 * step);
                if nv.is_finite() && nv <= value + decrease {
                    let mapping = norm(&moved) / step;
                    (theta, value, grad) = (next, nv, ng);
                    step *= 2.0;
                    if mapping < self.tolerance {
                        return Ok(theta);
                    }
                    break;
                }
                step /= 2.0;
                if step < 1e-20 {
                    return Err(ErmError::Numerical("line search failed: the objective is not finite".into()));
                }
            }
        }
        Ok(theta)
    }
}

/// `rounds` steps of projected gradient descent with a fixed `step` (the papers' Algorithm 1
/// loops, and the output-perturbation solver whose sensitivity is bounded step by step).
pub fn gradient_descent(
    grad: impl Fn(&[f64]) -> Vec<f64>,
    start: Vec<f64>,
    step: f64,
    rounds: u64,
    radius: Option<f64>,
) -> Result<Vec<f64>> {
    let mut theta = start;
    for _ in 0..rounds {
        let g = grad(&theta);
        crate::linalg::axpy(-step, &g, &mut theta);
        project(&mut theta, radius);
    }
    if theta.iter().all(|v| v.is_finite()) {
        Ok(theta)
    } else {
        Err(ErmError::Numerical("gradient descent diverged; lower Settings::learning_rate".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_methods_find_a_quadratic_minimum() {
        // F = 0.5 (4 a^2 + b^2) - a - b: minimum at (1/4, 1).
        let f = |t: &[f64]| (0.5 * (4.0 * t[0] * t[0] + t[1] * t[1]) - t[0] - t[1], vec![4.0 * t[0] - 1.0, t[1] - 1.0]);
        for constants in [Some((4.0, 1.0)), None] {
            let m = Minimizer { constants, radius: None, tolerance: 1e-12, max_iterations: 10_000 };
            let t = m.minimize(f, vec![0.0, 0.0]).unwrap();
            assert!((t[0] - 0.25).abs() < 1e-10 && (t[1] - 1.0).abs() < 1e-10, "{t:?}");
        }
        // Inside a ball of radius 0.5 the minimum moves to the boundary.
        let m = Minimizer { constants: Some((4.0, 1.0)), radius: Some(0.5), tolerance: 1e-12, max_iterations: 10_000 };
        assert!((norm(&m.minimize(f, vec![0.0, 0.0]).unwrap()) - 0.5).abs() < 1e-12);
    }
}
