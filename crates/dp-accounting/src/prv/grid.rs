//! The uniform grid of privacy-loss values and the mean-preserving, cell-centred discretisation of
//! Gopi, Lee and Wutschitz (2021), Section 5: each cell's probability sits on its node, and the
//! whole grid is shifted so the discrete mean equals the true (truncated) mean.

use super::privacy_loss::PrivacyLoss;
use crate::error::{AccountingError, Result};

/// Grids larger than this are refused (memory and time), with advice to coarsen.
pub const MAX_POINTS: usize = 1 << 24;

/// Nodes t_i = (i - n/2) h for i in 0..n; n is a power of two so the FFTs are fast.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    /// Number of nodes.
    pub n: usize,
    /// Mesh size.
    pub h: f64,
}

impl Grid {
    /// The smallest power-of-two grid with mesh `h` covering [-half_width, half_width].
    pub fn covering(half_width: f64, h: f64) -> Result<Self> {
        let needed = (2.0 * half_width / h).ceil() + 2.0;
        if !needed.is_finite() || needed > MAX_POINTS as f64 {
            return Err(AccountingError::Numerical(format!(
                "the PRV grid would need {needed:.3e} points (domain +-{half_width:.1}, mesh {h:.2e}); \
                 allow a larger eps error or use the RDP accountant"
            )));
        }
        Ok(Self { n: (needed as usize).next_power_of_two(), h })
    }

    /// The value of node i before any shift.
    pub fn node(&self, i: usize) -> f64 {
        (i as f64 - (self.n / 2) as f64) * self.h
    }
}

/// One step's loss on the grid: probabilities per node and the shift that preserves the mean.
#[derive(Debug, Clone)]
pub struct DiscreteLoss {
    /// Probability of each node (sums to 1).
    pub pmf: Vec<f64>,
    /// Amount added to every node value so that the discrete mean equals the true one.
    pub shift: f64,
}

/// Discretises `loss` truncated to the grid's range.
pub fn discretise(loss: &PrivacyLoss, grid: &Grid) -> Result<DiscreteLoss> {
    let (n, h) = (grid.n, grid.h);
    let (t_min, t_max) = (grid.node(0), grid.node(n - 1));
    // Cell edges: node i owns [t_i - h/2, t_i + h/2], the outer cells cut at the range's ends.
    let edge = |k: usize| (grid.node(0) + (k as f64 - 0.5) * h).clamp(t_min, t_max);
    let cdf_sf = evaluate_parallel(n + 1, |k| loss.cdf_sf(edge(k)));
    let remaining = 1.0 - cdf_sf[0].0 - cdf_sf[n].1;
    let mut pmf: Vec<f64> = cdf_sf
        .windows(2)
        .map(|w| {
            let ((cl, sl), (cr, sr)) = (w[0], w[1]);
            // Difference whichever tail is small, so neither side loses digits.
            let p = if cl < 0.5 { cr - cl } else { sl - sr };
            p.max(0.0) / remaining
        })
        .collect();
    let discrete_mean = chunked_sum(pmf.iter().enumerate().map(|(i, p)| p * grid.node(i)));
    let shift = loss.truncated_mean(t_min, t_max) - discrete_mean;
    if shift.is_nan() || shift.abs() >= h / 2.0 {
        return Err(AccountingError::Numerical(format!(
            "the discretised privacy loss mean is off by {shift:.3e}, more than half the mesh {h:.3e}"
        )));
    }
    let total = chunked_sum(pmf.iter().copied());
    pmf.iter_mut().for_each(|p| *p /= total);
    Ok(DiscreteLoss { pmf, shift })
}

/// Evaluates `f` at 0..len on all available cores.
fn evaluate_parallel<T: Send + Default + Clone>(len: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(len.max(1));
    let mut out = vec![T::default(); len];
    let chunk = len.div_ceil(threads);
    std::thread::scope(|s| {
        for (c, slice) in out.chunks_mut(chunk).enumerate() {
            let f = &f;
            s.spawn(move || {
                for (j, v) in slice.iter_mut().enumerate() {
                    *v = f(c * chunk + j);
                }
            });
        }
    });
    out
}

/// Sum with error growing like sqrt-ish of the chunk count rather than the length.
pub fn chunked_sum(values: impl Iterator<Item = f64>) -> f64 {
    let mut total = 0.0;
    let mut chunk = 0.0;
    for (i, v) in values.enumerate() {
        chunk += v;
        if i % 1024 == 1023 {
            total += chunk;
            chunk = 0.0;
        }
    }
    total + chunk
}

#[cfg(test)]
mod tests {
    use super::super::privacy_loss::Direction;
    use super::*;

    #[test]
    fn grid_is_power_of_two_and_centred() {
        let g = Grid::covering(10.0, 0.01).unwrap();
        assert!(g.n.is_power_of_two() && g.n >= 2002);
        assert_eq!(g.node(g.n / 2), 0.0);
        assert!(g.node(0) <= -10.0 && g.node(g.n - 1) >= 10.0);
        assert!(Grid::covering(1e6, 1e-6).is_err());
    }

    #[test]
    fn discretisation_preserves_mass_and_mean() {
        let loss = PrivacyLoss::new(0.05, 1.0, Direction::Remove);
        let g = Grid::covering(8.0, 1e-3).unwrap();
        let d = discretise(&loss, &g).unwrap();
        let mass: f64 = d.pmf.iter().sum();
        assert!((mass - 1.0).abs() < 1e-12);
        let mean: f64 = d.pmf.iter().enumerate().map(|(i, p)| p * (g.node(i) + d.shift)).sum();
        let want = loss.truncated_mean(g.node(0), g.node(g.n - 1));
        assert!((mean - want).abs() < 1e-12, "{mean} vs {want}");
    }
}
