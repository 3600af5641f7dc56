//! The noise allocation of Xiang et al. (Eqs. 10-11): minimise sum_j W_j sigma_j subject to
//! max over Delta in the sensitivity set of sum_j Delta_j^2 / sigma_j^2 <= tau, by the paper's
//! projected-gradient minimax: the step function replaced by a sigmoid whose weight mu grows,
//! alternating projected ascent on Delta and descent on sigma (here in log sigma, which keeps
//! sigma positive and the step scale-free). A final rescaling makes the returned sigma exactly
//! feasible, so whatever the iterations did, the constraint holds.
//!
//! The sensitivity set is a product of spheres ("blocks"): one sphere of radius alpha over all
//! coordinates is the paper's L2 clipping (the solution is then the uniform alpha / sqrt(tau),
//! docs/MECHANISMS.md, "The optimized additive noise mechanism"); one sphere of radius C_g per
//! group is group clipping, where the constraint is
//! sum_g C_g^2 / sigma_g^2 <= tau and the closed form is sigma_g proportional to (C_g^2 / W_g)^(1/3).

/// A block of coordinates whose joint sensitivity is a sphere.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// First coordinate.
    pub start: usize,
    /// Number of coordinates.
    pub len: usize,
    /// Sphere radius (the clipping bound of the block).
    pub radius: f64,
}

/// Iteration schedule of the solver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SolverSchedule {
    /// Alternating iterations (the paper: about 50).
    pub iterations: usize,
    /// Step on log sigma, relative.
    pub sigma_step: f64,
    /// Step on Delta, relative to the block radius.
    pub delta_step: f64,
    /// Sigmoid sharpness: the penalty is mu * sigmoid(sharpness * (h / tau - 1)).
    pub sharpness: f64,
    /// mu is multiplied by this every iteration, up to `mu_cap` times its start.
    pub mu_growth: f64,
    /// Largest growth of mu.
    pub mu_cap: f64,
}

impl Default for SolverSchedule {
    fn default() -> Self {
        Self { iterations: 50, sigma_step: 0.2, delta_step: 0.5, sharpness: 20.0, mu_growth: 1.2, mu_cap: 1e6 }
    }
}

/// The worst-case h(sigma) = max over the blocks' spheres of sum Delta^2 / sigma^2: each block
/// puts its whole radius on its smallest sigma.
pub fn worst_case(sigma: &[f64], blocks: &[Block]) -> f64 {
    blocks
        .iter()
        .map(|b| {
            let min = sigma[b.start..b.start + b.len].iter().copied().fold(f64::INFINITY, f64::min);
            b.radius * b.radius / (min * min)
        })
        .sum()
}

/// sigma minimising sum W_j sigma_j under the worst-case constraint h <= tau (tight at the end).
pub fn solve(weights: &[f64], blocks: &[Block], tau: f64, schedule: &SolverSchedule) -> Result<Vec<f64>, String> {
    let d = weights.len();
    if !(tau.is_finite() && tau > 0.0) {
        return Err(format!("tau must be positive, got {tau}"));
    }
    if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) {
        return Err("sensitivity weights must be finite and non-negative".into());
    }
    let mut next = 0;
    for b in blocks {
        if b.start != next || b.len == 0 || b.radius.is_nan() || b.radius <= 0.0 || b.radius.is_infinite() {
            return Err("blocks must tile the coordinates in order and have positive finite radii".into());
        }
        next += b.len;
    }
    if next != d {
        return Err(format!("blocks cover {next} of {d} coordinates"));
    }
    // Start from the uniform feasible point, Delta spread evenly over each sphere.
    let uniform = (blocks.iter().map(|b| b.radius * b.radius).sum::<f64>() / tau).sqrt();
    let mut log_sigma = vec![uniform.ln(); d];
    let mut delta = vec![0.0; d];
    for b in blocks {
        delta[b.start..b.start + b.len].fill(b.radius / (b.len as f64).sqrt());
    }
    let total_weight: f64 = weights.iter().sum();
    // mu starts at the objective's scale so that both terms matter from the first iteration.
    let mut mu = (total_weight * uniform).max(f64::MIN_POSITIVE);
    let mu_max = mu * schedule.mu_cap;
    for t in 0..schedule.iterations {
        let sigma: Vec<f64> = log_sigma.iter().map(|u| u.exp()).collect();
        let h: f64 = delta.iter().zip(&sigma).map(|(x, s)| x * x / (s * s)).sum();
        let z = schedule.sharpness * (h / tau - 1.0);
        // d/dh of mu * sigmoid(sharpness * (h / tau - 1)), with sigmoid'(z) = e / (1 + e)^2 and
        // e = exp(-|z|), which stays accurate where 1 - sigmoid(z) would round to zero.
        let e = (-z.abs()).exp();
        let p = mu * e / ((1.0 + e) * (1.0 + e)) * schedule.sharpness / tau;
        // Ascent on Delta (only the penalty depends on it), projected back onto each sphere.
        for b in blocks {
            let range = b.start..b.start + b.len;
            let grad: Vec<f64> = range.clone().map(|j| 2.0 * delta[j] / (sigma[j] * sigma[j])).collect();
            let gnorm = grad.iter().map(|g| g * g).sum::<f64>().sqrt().max(f64::MIN_POSITIVE);
            for (j, g) in range.clone().zip(&grad) {
                delta[j] += schedule.delta_step * b.radius * g / gnorm;
            }
            let norm = delta[range.clone()].iter().map(|x| x * x).sum::<f64>().sqrt();
            for x in &mut delta[range] {
                *x *= b.radius / norm;
            }
        }
        // Descent on log sigma: d f / d log sigma_j = a_j - p b_j with a_j = W_j sigma_j and
        // b_j = 2 Delta_j^2 / sigma_j^2, normalised per coordinate to (a - p b) / (a + p b) so
        // that the step is relative and bounded; it decays like 1 / (1 + t / 10).
        let step = schedule.sigma_step / (1.0 + t as f64 / 10.0);
        for j in 0..d {
            let a = weights[j] * sigma[j];
            let b = p * 2.0 * delta[j] * delta[j] / (sigma[j] * sigma[j]);
            if a + b > 0.0 {
                log_sigma[j] -= step * (a - b) / (a + b);
            }
        }
        mu = (mu * schedule.mu_growth).min(mu_max);
    }
    // Exact feasibility: sigma scaled so that the worst case equals tau.
    let sigma: Vec<f64> = log_sigma.iter().map(|u| u.exp()).collect();
    let scale = (worst_case(&sigma, blocks) / tau).sqrt();
    Ok(sigma.into_iter().map(|s| s * scale).collect())
}

/// The closed form under group clipping: sigma_g = k (C_g^2 / W_g)^(1/3) with k making
/// sum_g C_g^2 / sigma_g^2 = tau.
pub fn group_closed_form(weights: &[f64], bounds: &[f64], tau: f64) -> Vec<f64> {
    let shape: Vec<f64> = weights.iter().zip(bounds).map(|(w, c)| (c * c / w).cbrt()).collect();
    let h: f64 = shape.iter().zip(bounds).map(|(s, c)| c * c / (s * s)).sum();
    let k = (h / tau).sqrt();
    shape.into_iter().map(|s| s * k).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(a: f64, b: f64) -> f64 {
        (a - b).abs() / b.abs()
    }

    #[test]
    fn groups_agree_with_the_closed_form() {
        let weights = [3.0, 0.5, 10.0, 1.0];
        let bounds = [0.5, 0.5, 0.25, 1.0];
        let blocks: Vec<Block> =
            bounds.iter().enumerate().map(|(g, &c)| Block { start: g, len: 1, radius: c }).collect();
        let tau = 0.8;
        let schedule = SolverSchedule { iterations: 2000, ..SolverSchedule::default() };
        let got = solve(&weights, &blocks, tau, &schedule).unwrap();
        let want = group_closed_form(&weights, &bounds, tau);
        for (g, w) in got.iter().zip(&want) {
            assert!(rel(*g, *w) < 1e-4, "{got:?} vs {want:?}");
        }
        assert!(rel(worst_case(&got, &blocks), tau) < 1e-12);
    }

    /// The solver converges like 1/t: from uniform, the largest sigma is 5-19% above
    /// alpha/sqrt(tau) after the paper's 50 iterations, 0.2% after 500 and 0.02-0.05% after 2000.
    #[test]
    fn l2_clipping_gives_the_uniform_sigma() {
        let weights: Vec<f64> = (0..200).map(|i| 0.01 + (i * 37 % 101) as f64 / 10.0).collect();
        let alpha = 2.0;
        let tau = 0.3;
        let blocks = [Block { start: 0, len: weights.len(), radius: alpha }];
        let schedule = SolverSchedule { iterations: 2000, ..SolverSchedule::default() };
        let got = solve(&weights, &blocks, tau, &schedule).unwrap();
        let uniform = alpha / tau.sqrt();
        for s in &got {
            assert!(rel(*s, uniform) < 1e-3, "sigma {s} vs alpha/sqrt(tau) = {uniform}");
        }
    }

    #[test]
    fn refuses_bad_problems() {
        let one = [Block { start: 0, len: 2, radius: 1.0 }];
        let schedule = SolverSchedule::default();
        assert!(solve(&[1.0, 1.0], &one, 0.0, &schedule).is_err(), "tau must be positive");
        assert!(solve(&[1.0, -1.0], &one, 1.0, &schedule).is_err(), "weights must be non-negative");
        assert!(solve(&[1.0, 1.0, 1.0], &one, 1.0, &schedule).is_err(), "blocks must cover every coordinate");
        let gap = [Block { start: 1, len: 2, radius: 1.0 }];
        assert!(solve(&[1.0, 1.0], &gap, 1.0, &schedule).is_err(), "blocks must start at 0 and tile");
        let flat = [Block { start: 0, len: 2, radius: 0.0 }];
        assert!(solve(&[1.0, 1.0], &flat, 1.0, &schedule).is_err(), "radii must be positive");
    }
}
