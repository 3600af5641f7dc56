//! The PRV accountant of Gopi, Lee and Wutschitz (2021): numerical composition of privacy loss
//! random variables with rigorous error bounds, following their published implementation
//! (prv_accountant 0.2: domain from RDP tail bounds, mesh from the Hoeffding bound, cell-centred
//! mean-preserving discretisation), extended to take the worse of both add/remove directions.

mod compose;
mod grid;
mod hockey_stick;
mod privacy_loss;

pub use privacy_loss::{Direction, PrivacyLoss};

use crate::accountant::{Accountant, poisson_gaussian_only, without_gaussian};
use crate::error::{AccountingError, Result};
use crate::event::DpEvent;
use crate::ledger::PrivacyLedger;
use crate::rdp::RdpAccountant;
use crate::report::PrivacyReport;
use crate::validate;
use compose::compose;
use grid::{Grid, discretise};
use hockey_stick::HockeyStick;

/// PRV accountant; by default its epsilon upper bound is within 1% (0.01 below epsilon 1) of the
/// exact epsilon.
#[derive(Debug, Clone, Default)]
pub struct PrvAccountant {
    /// Allowed error in epsilon; default 0.004 * max(1, RDP epsilon).
    pub eps_error: Option<f64>,
    /// Allowed error in delta; default delta / 1000.
    pub delta_error: Option<f64>,
}

/// Epsilon bounds from one direction of adjacency.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    lower: f64,
    estimate: f64,
    upper: f64,
}

impl PrvAccountant {
    /// The domain half-width: RDP tail bounds for the whole run at delta_err/4 and for each single
    /// step at delta_err/(8 T), plus a margin (prv_accountant's `compute_safe_domain_size`).
    fn domain(&self, ledger: &PrivacyLedger, delta_error: f64, eps_error: f64) -> Result<f64> {
        let rdp = RdpAccountant::default();
        let groups = ledger.grouped()?;
        let total = groups.iter().map(|g| g.steps).sum::<u64>() as f64;
        let mut l = rdp.epsilon(ledger, delta_error / 4.0)?.epsilon;
        for g in groups {
            let one = PrivacyLedger::homogeneous(g.noise_multiplier, g.sample_rate, 1)?;
            l = l.max(rdp.epsilon(&one, delta_error / 8.0 / total)?.epsilon);
        }
        let l = l.max(eps_error) + 3.0;
        if l > 500.0 {
            return Err(AccountingError::Numerical(format!(
                "epsilon is too large (above {:.0}) for the PRV accountant; use the RDP accountant",
                l - 3.0
            )));
        }
        Ok(l)
    }

    fn bounds(
        ledger: &PrivacyLedger,
        direction: Direction,
        grid: Grid,
        delta: f64,
        delta_error: f64,
        eps_error: f64,
    ) -> Result<Bounds> {
        let groups = ledger.grouped()?;
        let discrete = groups
            .iter()
            .map(|g| discretise(&PrivacyLoss::new(g.sample_rate, g.noise_multiplier, direction), &grid))
            .collect::<Result<Vec<_>>>()?;
        let parts: Vec<_> = discrete.iter().zip(&groups).map(|(d, g)| (d, g.steps)).collect();
        let hs = HockeyStick::new(&compose(&parts, grid));
        Ok(Bounds {
            lower: (hs.epsilon(delta + delta_error)? - eps_error).max(0.0),
            estimate: hs.epsilon(delta)?,
            upper: hs.epsilon(delta - delta_error)? + eps_error,
        })
    }
}

impl Accountant for PrvAccountant {
    fn name(&self) -> &'static str {
        "prv"
    }

    fn supports(&self, event: &DpEvent) -> bool {
        poisson_gaussian_only(event)
    }

    fn epsilon(&self, ledger: &PrivacyLedger, delta: f64) -> Result<PrivacyReport> {
        let delta = validate::delta(delta)?;
        let groups = ledger.grouped()?;
        if groups.is_empty() || ledger.event().is_non_private() {
            return Ok(without_gaussian(self, ledger, delta));
        }
        let delta_error = match self.delta_error {
            Some(e) if e.is_finite() && e > 0.0 && e < delta => e,
            Some(e) => {
                return Err(AccountingError::InvalidParameter {
                    name: "delta error",
                    value: e.to_string(),
                    requirement: "must be in (0, delta)",
                });
            }
            None => delta / 1000.0,
        };
        let eps_error = match self.eps_error {
            Some(e) => validate::positive("eps error", e)?,
            None => 0.004 * RdpAccountant::default().epsilon(ledger, delta)?.epsilon.max(1.0),
        };
        let half_width = self.domain(ledger, delta_error, eps_error)?;
        let steps = groups.iter().map(|g| g.steps).sum::<u64>() as f64;
        let mesh = eps_error / (steps / 2.0 * (12.0 / delta_error).ln()).sqrt();
        let grid = Grid::covering(half_width, mesh)?;
        if (grid.n as f64) * f64::EPSILON * 16.0 > delta - delta_error {
            return Err(AccountingError::Numerical(format!(
                "delta {delta:e} is too small for a {}-point PRV grid; use the RDP accountant",
                grid.n
            )));
        }
        let (remove, add) = std::thread::scope(|s| {
            let r = s.spawn(|| Self::bounds(ledger, Direction::Remove, grid, delta, delta_error, eps_error));
            let a = Self::bounds(ledger, Direction::Add, grid, delta, delta_error, eps_error);
            (r.join().expect("PRV worker thread panicked"), a)
        });
        let (remove, add) = (remove?, add?);
        let guarantee = self.guarantee(&ledger.event());
        let mut report = PrivacyReport::new(remove.upper.max(add.upper), delta, self.name(), guarantee);
        report.epsilon_estimate = Some(remove.estimate.max(add.estimate));
        report.epsilon_lower = Some(remove.lower.max(add.lower));
        report.eps_error = Some(eps_error);
        report.delta_error = Some(delta_error);
        Ok(report)
    }
}
