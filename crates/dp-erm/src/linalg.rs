//! Small dense linear algebra on f64 (the models have a few thousand parameters at most): vector
//! helpers, a square matrix and its Cholesky factor. Written here rather than taken from nalgebra,
//! whose dependencies would change the features of crates Burn shares (matrixmultiply,
//! num-integer) and force a full rebuild of Burn in every build configuration.

use std::ops::{Index, IndexMut};

/// Inner product.
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Euclidean norm.
pub fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// y += alpha x.
pub fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    y.iter_mut().zip(x).for_each(|(y, x)| *y += alpha * x);
}

/// Projects `theta` onto the ball of radius `radius` (non-expansive, so every sensitivity bound
/// survives it).
pub fn project_ball(theta: &mut [f64], radius: f64) {
    let n = norm(theta);
    if n > radius {
        theta.iter_mut().for_each(|v| *v *= radius / n);
    }
}

/// The largest eigenvalue of the symmetric positive semi-definite operator `apply` and its unit
/// eigenvector, by power iteration from a fixed start, to relative change `tol` of the eigenvalue
/// (0: exactly `max_iter` steps).
pub fn power_iteration(dim: usize, apply: impl Fn(&[f64]) -> Vec<f64>, tol: f64, max_iter: usize) -> (f64, Vec<f64>) {
    let mut v: Vec<f64> = (0..dim).map(|i| 1.0 + 0.1 * ((i * 7919) % 13) as f64).collect();
    let n0 = norm(&v);
    v.iter_mut().for_each(|x| *x /= n0);
    let mut lambda = 0.0;
    for _ in 0..max_iter {
        let w = apply(&v);
        let next = norm(&w);
        if next == 0.0 {
            return (0.0, v);
        }
        v = w.into_iter().map(|x| x / next).collect();
        let done = (next - lambda).abs() <= tol * next;
        lambda = next;
        if done {
            break;
        }
    }
    (lambda, v)
}

/// Pearson correlation of two equally long samples.
pub fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
}

/// A dense square matrix, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    n: usize,
    data: Vec<f64>,
}

impl Matrix {
    /// The n x n matrix `scale * I`.
    pub fn scaled_identity(n: usize, scale: f64) -> Self {
        let mut m = Self { n, data: vec![0.0; n * n] };
        (0..n).for_each(|i| m[(i, i)] = scale);
        m
    }

    /// The Cholesky factor L (M = L L^T) of a symmetric positive definite matrix, or `None`.
    pub fn cholesky(&self) -> Option<Cholesky> {
        let n = self.n;
        let mut l = vec![0.0; n * n];
        for j in 0..n {
            let diag = self[(j, j)] - dot(&l[j * n..j * n + j], &l[j * n..j * n + j]);
            if diag.is_nan() || diag <= 0.0 {
                return None;
            }
            let d = diag.sqrt();
            l[j * n + j] = d;
            for i in j + 1..n {
                let s = self[(i, j)] - dot(&l[i * n..i * n + j], &l[j * n..j * n + j]);
                l[i * n + j] = s / d;
            }
        }
        Some(Cholesky { n, l })
    }
}

impl Index<(usize, usize)> for Matrix {
    type Output = f64;
    fn index(&self, (i, j): (usize, usize)) -> &f64 {
        &self.data[i * self.n + j]
    }
}

impl IndexMut<(usize, usize)> for Matrix {
    fn index_mut(&mut self, (i, j): (usize, usize)) -> &mut f64 {
        &mut self.data[i * self.n + j]
    }
}

/// A Cholesky factor, for solves.
#[derive(Debug, Clone)]
pub struct Cholesky {
    n: usize,
    l: Vec<f64>,
}

impl Cholesky {
    /// x with L L^T x = b (forward then backward substitution).
    pub fn solve(&self, b: &[f64]) -> Vec<f64> {
        let n = self.n;
        let mut y = b.to_vec();
        for i in 0..n {
            y[i] = (y[i] - dot(&self.l[i * n..i * n + i], &y[..i])) / self.l[i * n + i];
        }
        for i in (0..n).rev() {
            let s: f64 = (i + 1..n).map(|k| self.l[k * n + i] * y[k]).sum();
            y[i] = (y[i] - s) / self.l[i * n + i];
        }
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_iteration_finds_the_top_eigenvalue() {
        // diag(3, 1, 0.5) rotated is still symmetric with top eigenvalue 3.
        let apply = |v: &[f64]| vec![3.0 * v[0], v[1], 0.5 * v[2]];
        assert!((power_iteration(3, apply, 1e-12, 1000).0 - 3.0).abs() < 1e-9);
    }

    #[test]
    fn cholesky_solves_by_hand() {
        // [[4, 2], [2, 3]] x = [2, 1]: x = [0.5, 0].
        let mut m = Matrix::scaled_identity(2, 4.0);
        m[(1, 1)] = 3.0;
        m[(0, 1)] = 2.0;
        m[(1, 0)] = 2.0;
        let x = m.cholesky().unwrap().solve(&[2.0, 1.0]);
        assert!((x[0] - 0.5).abs() < 1e-15 && x[1].abs() < 1e-15, "{x:?}");
        m[(1, 1)] = 1.0; // det 0: not positive definite
        assert!(m.cholesky().is_none());
    }

    #[test]
    fn projection_and_correlation() {
        let mut t = vec![3.0, 4.0];
        project_ball(&mut t, 1.0);
        assert!((norm(&t) - 1.0).abs() < 1e-15 && (t[0] - 0.6).abs() < 1e-15);
        assert!((correlation(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.5]) - 0.997_948_7).abs() < 1e-7);
    }
}
