//! The strategy of banded matrix factorization (BandMF; Choquette-Choo et al., NeurIPS 2023,
//! arXiv 2306.08153; McKenna et al., ICLR 2025, arXiv 2405.15913): a lower-triangular Toeplitz
//! matrix C with b coefficients c_0..c_{b-1}, the prefix-sum workload A = B C factored through it,
//! and the noise of step t the t-th entry of C^{-1} z. Its error on the prefix sums is
//! mean_i ||B_i||^2 times the sensitivity ||c||^2 (one participation per b steps, the columns of
//! C disjoint), computed in O(n b) from the recurrence of C^{-1} (never an n x n inverse) and
//! minimised with L-BFGS over c_1..c_{b-1} (c_0 = 1 fixes the scale the error does not depend
//! on), then scaled to column norm 1. b = 1 is DP-SGD: error (n + 1) / 2.

/// L-BFGS memory (pairs kept).
const MEMORY: usize = 12;
/// Most L-BFGS iterations.
const MAX_ITERATIONS: usize = 2000;
/// Stop when an iteration improves the error by less than this, relatively.
const TOLERANCE: f64 = 1e-13;

/// A banded Toeplitz strategy of column norm 1 and its error on the prefix sums of `steps` steps.
#[derive(Debug, Clone, PartialEq)]
pub struct BandedStrategy {
    /// c_0..c_{b-1}: the first column's nonzero entries, of L2 norm 1.
    pub coefficients: Vec<f64>,
    /// Steps n of the workload.
    pub steps: usize,
    /// mean_i ||B_i||^2 ||c||^2: the mean squared error of the prefix sums per unit noise.
    pub error: f64,
}

impl BandedStrategy {
    /// The strategy of `bands` bands minimising the prefix-sum error over `steps` steps; refused
    /// unless 1 <= bands <= steps.
    pub fn optimal(steps: usize, bands: usize) -> Result<Self, String> {
        if bands == 0 || bands > steps {
            return Err(format!("{bands} bands for {steps} steps: the bands must be between 1 and the steps"));
        }
        let start = max_error_coefficients(bands);
        let tail = minimise(|x| loss_of_tail(x, steps), start[1..].to_vec());
        let mut c = vec![1.0];
        c.extend(tail);
        Self::from_coefficients(c, steps)
    }

    /// The strategy of coefficients `c` (scaled to norm 1) over `steps` steps; refused unless
    /// finite with c_0 > 0 (C invertible) and at most `steps` of them.
    pub fn from_coefficients(c: Vec<f64>, steps: usize) -> Result<Self, String> {
        let norm = norm_squared(&c).sqrt();
        if c.is_empty() || c.len() > steps || !norm.is_finite() || c[0] <= 0.0 {
            return Err(format!("{} coefficients for {steps} steps, c_0 > 0 and finite required", c.len()));
        }
        let coefficients: Vec<f64> = c.iter().map(|x| x / norm).collect();
        let error = loss(&coefficients, steps).0;
        if !error.is_finite() {
            return Err("the strategy's inverse overflows: its error is not finite".into());
        }
        Ok(Self { coefficients, steps, error })
    }

    /// Bands b.
    pub fn bands(&self) -> usize {
        self.coefficients.len()
    }

    /// The column norm ||c|| (1 up to rounding): the sensitivity of one participation.
    pub fn column_norm(&self) -> f64 {
        norm_squared(&self.coefficients).sqrt()
    }
}

/// Fichtenberger et al.'s coefficients (C = sqrt(A), optimal for the max error): the start.
fn max_error_coefficients(bands: usize) -> Vec<f64> {
    let mut c = vec![1.0; bands];
    for k in 1..bands {
        c[k] = c[k - 1] * (2 * k - 1) as f64 / (2 * k) as f64;
    }
    c
}

/// The loss and gradient over c_1..c_{b-1} with c_0 = 1.
fn loss_of_tail(tail: &[f64], steps: usize) -> (f64, Vec<f64>) {
    let mut c = vec![1.0];
    c.extend_from_slice(tail);
    let (l, g) = loss(&c, steps);
    (l, g[1..].to_vec())
}

/// ||c||^2.
fn norm_squared(c: &[f64]) -> f64 {
    c.iter().map(|x| x * x).sum()
}

/// x = C^{-1} rhs for the banded lower-triangular Toeplitz C of `c` (forward substitution).
fn solve_lower(c: &[f64], rhs: &[f64]) -> Vec<f64> {
    let mut x = vec![0.0; rhs.len()];
    for t in 0..rhs.len() {
        let past: f64 = (1..c.len().min(t + 1)).map(|j| c[j] * x[t - j]).sum();
        x[t] = (rhs[t] - past) / c[0];
    }
    x
}

/// x = C^{-T} rhs for the same C (backward substitution).
fn solve_upper(c: &[f64], rhs: &[f64]) -> Vec<f64> {
    let n = rhs.len();
    let mut x = vec![0.0; n];
    for t in (0..n).rev() {
        let later: f64 = (1..c.len()).filter(|j| t + j < n).map(|j| c[j] * x[t + j]).sum();
        x[t] = (rhs[t] - later) / c[0];
    }
    x
}

/// The error E(c) ||c||^2 of `c` over `steps` steps, and its gradient in c: with B = C^{-1} 1
/// (the Toeplitz coefficients of A C^{-1}), E = (1/n) sum_k (n - k) B_k^2; its gradient through
/// the adjoint lambda = C^{-T} dE/dB is dE/dc_j = -sum_t lambda_t B_{t-j}.
fn loss(c: &[f64], steps: usize) -> (f64, Vec<f64>) {
    let n = steps as f64;
    let b = solve_lower(c, &vec![1.0; steps]);
    let e = b.iter().enumerate().map(|(k, bk)| (n - k as f64) * bk * bk).sum::<f64>() / n;
    let s = norm_squared(c);
    let g: Vec<f64> = b.iter().enumerate().map(|(k, bk)| 2.0 * (n - k as f64) * bk / n).collect();
    let lambda = solve_upper(c, &g);
    let grad = (0..c.len())
        .map(|j| {
            let de: f64 = -(j..steps).map(|t| lambda[t] * b[t - j]).sum::<f64>();
            s * de + e * 2.0 * c[j]
        })
        .collect();
    (e * s, grad)
}

/// Minimises `f` (value and gradient) from `x` by L-BFGS with a backtracking Armijo search.
fn minimise(f: impl Fn(&[f64]) -> (f64, Vec<f64>), mut x: Vec<f64>) -> Vec<f64> {
    if x.is_empty() {
        return x;
    }
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f64>();
    let (mut fx, mut g) = f(&x);
    let mut pairs: std::collections::VecDeque<(Vec<f64>, Vec<f64>, f64)> = Default::default();
    for _ in 0..MAX_ITERATIONS {
        // The two-loop recursion: d = -H g.
        let mut q = g.clone();
        let mut alphas = Vec::with_capacity(pairs.len());
        for (s, y, rho) in pairs.iter().rev() {
            let a = rho * dot(s, &q);
            q.iter_mut().zip(y).for_each(|(qi, yi)| *qi -= a * yi);
            alphas.push(a);
        }
        if let Some((s, y, _)) = pairs.back() {
            let gamma = dot(s, y) / dot(y, y);
            q.iter_mut().for_each(|qi| *qi *= gamma);
        }
        for ((s, y, rho), a) in pairs.iter().zip(alphas.into_iter().rev()) {
            let beta = rho * dot(y, &q);
            q.iter_mut().zip(s).for_each(|(qi, si)| *qi += (a - beta) * si);
        }
        let mut d: Vec<f64> = q.into_iter().map(|v| -v).collect();
        if dot(&d, &g) >= 0.0 {
            d = g.iter().map(|v| -v).collect();
            pairs.clear();
        }
        let slope = dot(&d, &g);
        let mut step = if pairs.is_empty() { 1e-3 / dot(&g, &g).sqrt().max(1e-300) } else { 1.0 };
        let next = loop {
            let trial: Vec<f64> = x.iter().zip(&d).map(|(xi, di)| xi + step * di).collect();
            let (ft, gt) = f(&trial);
            if ft.is_finite() && ft <= fx + 1e-4 * step * slope {
                break Some((trial, ft, gt));
            }
            step *= 0.5;
            if step < 1e-20 {
                break None;
            }
        };
        let Some((trial, ft, gt)) = next else { break };
        let s: Vec<f64> = trial.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = gt.iter().zip(&g).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        if sy > 1e-300 {
            if pairs.len() == MEMORY {
                pairs.pop_front();
            }
            pairs.push_back((s, y, 1.0 / sy));
        }
        let improvement = (fx - ft) / fx.abs().max(1e-300);
        (x, fx, g) = (trial, ft, gt);
        if improvement < TOLERANCE {
            break;
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    /// E ||c||^2 from the dense matrices: B = A C^{-1}, mean of its rows' squared norms.
    fn dense_error(c: &[f64], n: usize) -> f64 {
        // Row i of A C^{-1}: e_i^T A C^{-1} = (C^{-T} A^T e_i)^T; A^T e_i is 1 on 0..=i.
        let rows = (0..n).map(|i| {
            let indicator: Vec<f64> = (0..n).map(|t| if t <= i { 1.0 } else { 0.0 }).collect();
            norm_squared(&solve_upper(c, &indicator))
        });
        rows.sum::<f64>() / n as f64 * norm_squared(c)
    }

    #[test]
    fn one_band_is_dp_sgd() {
        let s = BandedStrategy::optimal(100, 1).unwrap();
        assert_eq!(s.coefficients, vec![1.0]);
        assert!((s.error - 50.5).abs() < 1e-12, "{}", s.error);
    }

    #[test]
    fn the_recurrences_error_is_the_dense_one_and_its_gradient_the_difference_quotient() {
        let c = [1.0, 0.4, -0.1, 0.05];
        let (l, g) = loss(&c, 23);
        assert!((l - dense_error(&c, 23)).abs() < 1e-10 * l, "{l}");
        for j in 0..c.len() {
            let h = 1e-6;
            let mut up = c;
            up[j] += h;
            let mut down = c;
            down[j] -= h;
            let fd = (loss(&up, 23).0 - loss(&down, 23).0) / (2.0 * h);
            assert!((fd - g[j]).abs() < 1e-6 * l, "{j}: {fd} {}", g[j]);
        }
    }

    #[test]
    fn more_bands_never_cost_more_and_the_column_norm_is_one() {
        let errors: Vec<f64> = [1, 2, 4, 8].map(|b| BandedStrategy::optimal(64, b).unwrap().error).to_vec();
        assert!(errors.windows(2).all(|w| w[1] <= w[0]), "{errors:?}");
        let s = BandedStrategy::optimal(64, 8).unwrap();
        assert!((s.column_norm() - 1.0).abs() < 1e-12);
        assert!(BandedStrategy::optimal(4, 5).is_err() && BandedStrategy::optimal(4, 0).is_err());
        assert!(BandedStrategy::from_coefficients(vec![-1.0, 0.5], 4).is_err());
        assert!(BandedStrategy::from_coefficients(vec![f64::NAN], 4).is_err());
    }
}
