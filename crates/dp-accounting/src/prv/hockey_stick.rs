//! Delta and epsilon of a composed privacy loss: delta(eps) = E[(1 - exp(eps - Y))_+].

use super::compose::Composed;
use crate::error::{AccountingError, Result};

/// Tail sums of a composed loss, ready to answer epsilon-for-delta queries.
pub struct HockeyStick {
    /// Node values (grid node plus the composed shift).
    values: Vec<f64>,
    /// tail_mass[i] = sum_{j >= i} p_j.
    tail_mass: Vec<f64>,
    /// tail_weighted[i] = sum_{j >= i} p_j exp(-t_j).
    tail_weighted: Vec<f64>,
}

impl HockeyStick {
    /// Precomputes the tail sums (from the right, so small tails keep their digits).
    pub fn new(c: &Composed) -> Self {
        let n = c.pmf.len();
        let values: Vec<f64> = (0..n).map(|i| c.grid.node(i) + c.offset).collect();
        let mut tail_mass = vec![0.0; n + 1];
        let mut tail_weighted = vec![0.0; n + 1];
        for i in (0..n).rev() {
            tail_mass[i] = tail_mass[i + 1] + c.pmf[i];
            tail_weighted[i] = tail_weighted[i + 1] + c.pmf[i] * (-values[i]).exp();
        }
        Self { values, tail_mass, tail_weighted }
    }

    /// delta at epsilon = node value i.
    fn delta_at_node(&self, i: usize) -> f64 {
        self.tail_mass[i] - self.values[i].exp() * self.tail_weighted[i]
    }

    /// The smallest epsilon >= 0 with delta(epsilon) <= `delta`.
    pub fn epsilon(&self, delta: f64) -> Result<f64> {
        let n = self.values.len();
        if self.delta_at_node(n - 1) > delta {
            return Err(AccountingError::Numerical(
                "epsilon lies beyond the PRV domain; use the RDP accountant".to_string(),
            ));
        }
        // delta(t_i) decreases in i: find the first node where it is <= delta.
        let (mut lo, mut hi) = (0usize, n - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.delta_at_node(mid) <= delta { hi = mid } else { lo = mid + 1 }
        }
        if lo == 0 {
            return Ok(self.values[0].max(0.0));
        }
        // On (t_{lo-1}, t_lo] delta(eps) = tail_mass[lo] - exp(eps) tail_weighted[lo].
        let eps = ((self.tail_mass[lo] - delta) / self.tail_weighted[lo]).ln();
        Ok(eps.max(0.0))
    }
}
