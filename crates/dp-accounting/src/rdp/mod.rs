//! Rényi DP accounting: the RDP of one subsampled Gaussian step and its conversion to
//! (epsilon, delta) ([`subsampled_gaussian`]), and the accountant that sums those curves over a
//! ledger.

pub mod subsampled_gaussian;

pub use subsampled_gaussian::{Conversion, extended_orders, standard_orders, subsampled_gaussian_rdp};

use crate::accountant::{Accountant, poisson_gaussian_only, without_gaussian};
use crate::error::{AccountingError, Result};
use crate::event::DpEvent;
use crate::ledger::PrivacyLedger;
use crate::repeat_and_select::repeated_rdp;
use crate::report::PrivacyReport;
use crate::validate;
use serde::{Deserialize, Serialize};

/// Which RDP orders to optimize over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OrderGrid {
    /// Opacus / TF Privacy's grid (reproduces their epsilons exactly).
    Standard,
    /// The standard grid widened at both ends (never worse, needed below epsilon ~ 0.1).
    Extended,
}

impl OrderGrid {
    /// The orders of this grid, ascending.
    pub fn orders(self) -> Vec<f64> {
        match self {
            OrderGrid::Standard => standard_orders(),
            OrderGrid::Extended => extended_orders(),
        }
    }
}

/// RDP accountant of Mironov, Talwar and Zhang (2019) with a choice of grid and conversion.
#[derive(Debug, Clone)]
pub struct RdpAccountant {
    grid: OrderGrid,
    orders: Vec<f64>,
    conversion: Conversion,
}

impl Default for RdpAccountant {
    /// Extended grid with the Balle et al. (2020) conversion: the tightest sound choice.
    fn default() -> Self {
        Self::new(OrderGrid::Extended, Conversion::Balle2020)
    }
}

impl RdpAccountant {
    /// An accountant over `grid` converting with `conversion`.
    pub fn new(grid: OrderGrid, conversion: Conversion) -> Self {
        Self { grid, orders: grid.orders(), conversion }
    }

    /// The orders optimized over.
    pub fn orders(&self) -> &[f64] {
        &self.orders
    }

    /// The RDP of the whole ledger at each order.
    pub fn rdp_curve(&self, ledger: &PrivacyLedger) -> Result<Vec<f64>> {
        self.event_curve(&ledger.event())
    }

    /// The RDP of `event` at each order: its Gaussian releases (Poisson-sampled or not) and its
    /// searches (`repeat_and_select`), composed; a part that releases no noise adds nothing (the
    /// label says what it costs), one released without privacy makes it infinite.
    fn event_curve(&self, event: &DpEvent) -> Result<Vec<f64>> {
        let mut curve = vec![0.0; self.orders.len()];
        for (times, part) in event.parts() {
            let one: Vec<f64> = match part {
                DpEvent::RepeatAndSelect { repetitions, of } => {
                    repeated_rdp(&self.orders, &self.event_curve(of)?, *repetitions)?
                }
                DpEvent::AnyOf { events } => {
                    // A choice made without the data: the RDP of the mixture is at most the worst.
                    let curves = events.iter().map(|e| self.event_curve(e)).collect::<Result<Vec<_>>>()?;
                    (0..self.orders.len())
                        .map(|i| curves.iter().map(|c| c[i]).fold(f64::NEG_INFINITY, f64::max))
                        .collect()
                }
                DpEvent::NonPrivate { .. } => vec![f64::INFINITY; self.orders.len()],
                other => match other.as_gaussian(1)? {
                    Some(g) => self
                        .orders
                        .iter()
                        .map(|&alpha| subsampled_gaussian_rdp(g.sample_rate, g.noise_multiplier, alpha))
                        .collect::<Result<_>>()?,
                    None => continue,
                },
            };
            for (acc, rdp) in curve.iter_mut().zip(one) {
                *acc += rdp * times as f64;
            }
        }
        Ok(curve)
    }

    /// The best (epsilon, order index) of an RDP curve at `delta`; infinite RDP values are skipped.
    fn best(&self, curve: &[f64], delta: f64) -> Option<(f64, usize)> {
        self.orders
            .iter()
            .zip(curve)
            .enumerate()
            .filter(|(_, (_, rdp))| rdp.is_finite())
            .map(|(i, (&alpha, &rdp))| (self.conversion.epsilon(alpha, rdp, delta), i))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    }
}

impl Accountant for RdpAccountant {
    fn name(&self) -> &'static str {
        "rdp"
    }

    /// Poisson-sampled (or unsampled) Gaussian releases, and searches over candidates it
    /// supports (Papernot & Steinke's theorems cover any candidate with an RDP curve).
    fn supports(&self, event: &DpEvent) -> bool {
        event.parts().iter().all(|(_, part)| match part {
            DpEvent::RepeatAndSelect { of, .. } => self.supports(of),
            DpEvent::AnyOf { events } => events.iter().all(|e| self.supports(e)),
            other => poisson_gaussian_only(other),
        })
    }

    fn epsilon(&self, ledger: &PrivacyLedger, delta: f64) -> Result<PrivacyReport> {
        let delta = validate::delta(delta)?;
        let curve = self.rdp_curve(ledger)?;
        if ledger.event().is_non_private() || curve.iter().all(|&rdp| rdp == 0.0) {
            return Ok(without_gaussian(self, ledger, delta));
        }
        let (epsilon, idx) = self
            .best(&curve, delta)
            .ok_or_else(|| AccountingError::Numerical("the RDP is infinite at every order".to_string()))?;
        let mut report = PrivacyReport::new(epsilon, delta, self.name(), self.guarantee(&ledger.event()));
        report.optimal_order = Some(self.orders[idx]);
        report.optimal_order_at_grid_edge = Some(idx == 0 || idx + 1 == self.orders.len());
        report.conversion = Some(format!("{} ({:?} grid)", self.conversion.name(), self.grid).to_lowercase());
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Guarantee;

    #[test]
    fn empty_ledger_spends_nothing() {
        let r = RdpAccountant::default().epsilon(&PrivacyLedger::new(), 1e-5).unwrap();
        assert_eq!(r.epsilon, 0.0);
        assert_eq!(r.guarantee, Guarantee::Certified);
    }

    #[test]
    fn heterogeneous_ledger_composes_additively() {
        let acc = RdpAccountant::default();
        let mut l = PrivacyLedger::new();
        l.record(1.0, 0.01, 100).unwrap();
        l.record(2.0, 0.02, 50).unwrap();
        let curve = acc.rdp_curve(&l).unwrap();
        let a = acc.rdp_curve(&PrivacyLedger::homogeneous(1.0, 0.01, 100).unwrap()).unwrap();
        let b = acc.rdp_curve(&PrivacyLedger::homogeneous(2.0, 0.02, 50).unwrap()).unwrap();
        for i in 0..curve.len() {
            assert!((curve[i] - a[i] - b[i]).abs() <= 1e-12 * curve[i]);
        }
    }

    #[test]
    fn extended_grid_is_never_worse_and_helps_at_small_epsilon() {
        let std = RdpAccountant::new(OrderGrid::Standard, Conversion::Balle2020);
        let ext = RdpAccountant::default();
        let l = PrivacyLedger::homogeneous(50.0, 0.01, 100).unwrap();
        let e_std = std.epsilon(&l, 1e-5).unwrap();
        let e_ext = ext.epsilon(&l, 1e-5).unwrap();
        assert!(e_std.optimal_order_at_grid_edge.unwrap());
        assert!(e_ext.epsilon < 0.5 * e_std.epsilon, "{} vs {}", e_ext.epsilon, e_std.epsilon);
    }

    #[test]
    fn balle_is_tighter_than_classic() {
        let l = PrivacyLedger::homogeneous(1.1, 256.0 / 60000.0, 14062).unwrap();
        let b = RdpAccountant::new(OrderGrid::Standard, Conversion::Balle2020).epsilon(&l, 1e-5).unwrap();
        let c = RdpAccountant::new(OrderGrid::Standard, Conversion::Classic).epsilon(&l, 1e-5).unwrap();
        assert!(b.epsilon < c.epsilon);
    }
}
