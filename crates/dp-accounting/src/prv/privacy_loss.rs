//! The privacy loss random variable of one Poisson-subsampled Gaussian step, in both directions of
//! add/remove adjacency, with its CDF in closed form and its truncated mean by quadrature.
//!
//! With P = (1-q) N(0, z^2) + q N(1, z^2) and Q = N(0, z^2):
//! - `Remove`: Y = ln(P(x)/Q(x)), x ~ P, supported on (ln(1-q), inf);
//! - `Add`:    Y = ln(Q(x)/P(x)), x ~ Q, supported on (-inf, -ln(1-q)).
//!
//! A run's epsilon is the larger of the two (the neighbouring pair is fixed across steps).

use crate::special::ndtr;

/// Which neighbouring dataset is the "real" one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The real dataset has one more record than its neighbour.
    Remove,
    /// The real dataset has one record fewer than its neighbour.
    Add,
}

/// The privacy loss of one step with noise multiplier `z` and sampling rate `q`.
#[derive(Debug, Clone, Copy)]
pub struct PrivacyLoss {
    q: f64,
    z: f64,
    direction: Direction,
}

impl PrivacyLoss {
    /// The loss for one direction; `q` in (0, 1] and `z` > 0 are validated by the caller.
    pub fn new(q: f64, z: f64, direction: Direction) -> Self {
        Self { q, z, direction }
    }

    /// ln(P(x)/Q(x)) as a function of the observation x, computed without overflow.
    fn remove_loss_at(&self, x: f64) -> f64 {
        let u = (2.0 * x - 1.0) / (2.0 * self.z * self.z);
        if self.q >= 1.0 {
            u
        } else if u > 0.0 {
            u + (self.q + (1.0 - self.q) * (-u).exp()).ln()
        } else {
            (self.q * u.exp_m1()).ln_1p()
        }
    }

    /// The observation x at which the remove-direction loss equals t (-inf below the support).
    fn observation_for_remove_loss(&self, t: f64) -> f64 {
        let r = t.exp_m1() / self.q;
        if r <= -1.0 { f64::NEG_INFINITY } else { self.z * self.z * r.ln_1p() + 0.5 }
    }

    /// (P[Y <= t], P`[Y > t]`), each accurate in its own small tail.
    pub fn cdf_sf(&self, t: f64) -> (f64, f64) {
        let z = self.z;
        match self.direction {
            Direction::Remove => {
                let x = self.observation_for_remove_loss(t);
                if x == f64::NEG_INFINITY {
                    return (0.0, 1.0);
                }
                let q = self.q;
                let cdf = (1.0 - q) * ndtr(x / z) + q * ndtr((x - 1.0) / z);
                let sf = (1.0 - q) * ndtr(-x / z) + q * ndtr((1.0 - x) / z);
                (cdf, sf)
            }
            Direction::Add => {
                // Y <= t  <=>  remove-loss(x) >= -t  <=>  x >= x(-t), with x ~ N(0, z^2).
                let x = self.observation_for_remove_loss(-t);
                if x == f64::NEG_INFINITY {
                    return (1.0, 0.0);
                }
                (ndtr(-x / z), ndtr(x / z))
            }
        }
    }

    /// E[Y | a <= Y <= b], by Gauss-Legendre quadrature over the observation x.
    pub fn truncated_mean(&self, a: f64, b: f64) -> f64 {
        let z = self.z;
        // The observation interval mapping onto [a, b], cut where the densities vanish (40 sd).
        let (lo, hi, sign) = match self.direction {
            Direction::Remove => (self.observation_for_remove_loss(a), self.observation_for_remove_loss(b), 1.0),
            Direction::Add => (self.observation_for_remove_loss(-b), self.observation_for_remove_loss(-a), -1.0),
        };
        let lo = lo.max(-40.0 * z);
        let hi = hi.min(1.0 + 40.0 * z);
        if hi <= lo {
            return 0.5 * (a + b);
        }
        let q = self.q;
        let density = |x: f64| match self.direction {
            Direction::Remove => (1.0 - q) * normal_pdf(x / z) / z + q * normal_pdf((x - 1.0) / z) / z,
            Direction::Add => normal_pdf(x / z) / z,
        };
        let [first, zeroth] = integrate_pair(lo, hi, 8192, |x| {
            let w = density(x);
            [w * sign * self.remove_loss_at(x), w]
        });
        first / zeroth
    }
}

fn normal_pdf(u: f64) -> f64 {
    (-0.5 * u * u).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// Integrates two functions at once over [lo, hi] with a composite 5-point Gauss-Legendre rule.
fn integrate_pair(lo: f64, hi: f64, panels: usize, mut f: impl FnMut(f64) -> [f64; 2]) -> [f64; 2] {
    const NODES: [f64; 5] =
        [-0.906_179_845_938_664, -0.538_469_310_105_683, 0.0, 0.538_469_310_105_683, 0.906_179_845_938_664];
    const WEIGHTS: [f64; 5] = [
        0.236_926_885_056_189,
        0.478_628_670_499_366,
        0.568_888_888_888_889,
        0.478_628_670_499_366,
        0.236_926_885_056_189,
    ];
    let width = (hi - lo) / panels as f64;
    let mut acc = [0.0; 2];
    for p in 0..panels {
        let mid = lo + (p as f64 + 0.5) * width;
        for (node, weight) in NODES.iter().zip(WEIGHTS) {
            let v = f(mid + 0.5 * width * node);
            acc[0] += weight * v[0];
            acc[1] += weight * v[1];
        }
    }
    [acc[0] * 0.5 * width, acc[1] * 0.5 * width]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_batch_loss_is_gaussian() {
        // q = 1: Y ~ N(1/(2z^2), 1/z^2) in both directions.
        let z = 0.8;
        for dir in [Direction::Remove, Direction::Add] {
            let loss = PrivacyLoss::new(1.0, z, dir);
            for t in [-1.0, 0.3, 2.5] {
                let want = ndtr((t - 0.5 / (z * z)) * z);
                let (cdf, sf) = loss.cdf_sf(t);
                assert!((cdf - want).abs() < 1e-14, "{dir:?} t={t}: {cdf} vs {want}");
                assert!((cdf + sf - 1.0).abs() < 1e-14);
            }
            let mean = loss.truncated_mean(-40.0, 40.0);
            assert!((mean - 0.5 / (z * z)).abs() < 1e-10, "{dir:?}: {mean}");
        }
    }

    #[test]
    fn supports_and_monotone_cdf() {
        let q: f64 = 0.01;
        let rem = PrivacyLoss::new(q, 1.0, Direction::Remove);
        let add = PrivacyLoss::new(q, 1.0, Direction::Add);
        assert_eq!(rem.cdf_sf((1.0 - q).ln() - 1e-9), (0.0, 1.0));
        assert_eq!(add.cdf_sf(-(1.0 - q).ln() + 1e-9), (1.0, 0.0));
        let mut prev = 0.0;
        for i in 0..200 {
            let t = -0.02 + i as f64 * 0.01;
            let (c, _) = rem.cdf_sf(t);
            assert!(c >= prev);
            prev = c;
        }
    }

    #[test]
    fn mean_is_the_kl_divergence_and_positive() {
        // E_P[ln P/Q] = KL(P||Q) >= 0 and E_Q[ln Q/P] = KL(Q||P) >= 0; for q = 0.5, z = 1 check the
        // remove mean against direct quadrature of the KL integral on a fine trapezoid grid.
        let (q, z) = (0.5, 1.0);
        let rem = PrivacyLoss::new(q, z, Direction::Remove).truncated_mean(-50.0, 50.0);
        let add = PrivacyLoss::new(q, z, Direction::Add).truncated_mean(-50.0, 50.0);
        let mut kl = 0.0;
        let n = 400_000;
        let (lo, hi) = (-20.0, 21.0);
        let dx = (hi - lo) / n as f64;
        for i in 0..=n {
            let x: f64 = lo + i as f64 * dx;
            let p0 = normal_pdf(x / z) / z;
            let p = (1.0 - q) * p0 + q * normal_pdf((x - 1.0) / z) / z;
            let w = if i == 0 || i == n { 0.5 } else { 1.0 };
            kl += w * p * (p / p0).ln() * dx;
        }
        assert!(rem > 0.0 && add > 0.0);
        assert!((rem - kl).abs() < 1e-9, "{rem} vs {kl}");
    }
}
