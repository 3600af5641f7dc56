//! White-box gradient canaries inside the DP step, for the one-run audit (Steinke, Nasr and
//! Jagielski 2023, Section 7) of every mechanism of `dptrain train`.
//!
//! Canary i is a record whose clipped gradient is v_i e_j: one model coordinate j at the largest
//! value its layer's clipping admits (C under flat clipping, C / sqrt(layers) per layer), the same
//! at every theta (a Dirac canary). Each is in the training set with probability 1/2 and, when
//! in, Poisson-sampled into a lot like every record; a mechanism that computes the full-data
//! gradient w (optimized-paper) sees the included canaries in it too. The coordinates are those
//! where the step's noise is smallest against v (for optimized-paper its smallest sigmas: the
//! worst case of docs/MECHANISMS.md, "The optimized additive noise mechanism"), chosen from an
//! allocation computed before any canary counts, so
//! that the choice does not depend on which are in. The auditor knows every other record (DP's
//! threat model): it scores canary i by the log likelihood ratio, "sampled with probability q"
//! against "absent", of the released coordinate minus the other records' clipped sum there,
//! added over the steps.

use crate::error::{EngineError, Result};
use crate::step::hook::StepHook;
use crate::tensor_io::{to_host, vector};
use burn::tensor::Tensor;
use dp_accounting::audit::guesses::{OneRunBound, one_run_bound};
use dp_data::rng_state::ChaChaState;
use dp_kernels::NoiseScale;
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use serde::Serialize;

/// The canaries' own random stream (inclusion and sampling), apart from the run's others.
const CANARY_STREAM: u64 = 3;

/// Where a canary sits: parameter tensor, flat index in it, and its gradient value v.
#[derive(Debug, Clone, Copy)]
struct Placement {
    tensor: usize,
    index: usize,
    value: f64,
}

/// The canaries of one run and the auditor's running scores.
#[derive(Debug, Clone)]
pub struct WhiteBoxCanaries {
    included: Vec<bool>,
    scores: Vec<f64>,
    rate: f64,
    placement: Vec<Placement>,
    rng: ChaCha20Rng,
    /// This step's other-records sum at each canary's coordinate.
    pending: Vec<f64>,
}

/// Each coordinate's noise standard deviation on the host, for the tensors `wanted` picks (the
/// others left empty, so that no sigma is read from the device for nothing).
fn host_sigmas(scales: &[NoiseScale], sizes: &[usize], wanted: impl Fn(usize) -> bool) -> Vec<Vec<f32>> {
    scales
        .iter()
        .zip(sizes)
        .enumerate()
        .map(|(t, (s, &n))| match s {
            _ if !wanted(t) => Vec::new(),
            NoiseScale::Uniform(sigma) => vec![*sigma; n],
            NoiseScale::PerCoordinate(x) => to_host(x.as_ref()),
        })
        .collect()
}

/// The refusal of `m` canaries on a model of `coordinates` scalars (one coordinate each).
fn too_many(m: usize, coordinates: usize) -> EngineError {
    EngineError::invalid(
        "audit canaries",
        format!("{m} canaries need as many coordinates; the model has {coordinates}"),
    )
}

/// ln(1 - q + q e^a) without overflow: the log likelihood ratio of one step's observation.
fn log_mixture(q: f64, a: f64) -> f64 {
    let (x, y) = ((1.0 - q).ln(), q.ln() + a);
    let (hi, lo) = if x > y { (x, y) } else { (y, x) };
    hi + (lo - hi).exp().ln_1p()
}

impl WhiteBoxCanaries {
    /// `count` canaries, each included with probability 1/2, sampled at `rate` when included;
    /// drawn from `seed`'s canary stream (the OS when None).
    pub fn new(count: usize, rate: f64, seed: Option<u64>) -> Result<Self> {
        if count == 0 {
            return Err(EngineError::invalid("audit canaries", "need at least 1"));
        }
        if !(rate > 0.0 && rate <= 1.0) {
            return Err(EngineError::invalid("audit canaries", format!("sampling rate {rate} is not in (0, 1]")));
        }
        let mut rng = ChaChaState::new(seed, CANARY_STREAM).restore();
        let included = (0..count).map(|_| rng.random_bool(0.5)).collect();
        Ok(Self { included, scores: vec![0.0; count], rate, placement: Vec::new(), rng, pending: Vec::new() })
    }

    /// `count` canaries of a run sampled at `rate`, placed under the noise `scales` of a step of
    /// a model whose parameters have `sizes` scalars, every one clipped to `bound`.
    pub fn for_run(
        count: usize,
        rate: f64,
        seed: Option<u64>,
        scales: &[NoiseScale],
        sizes: &[usize],
        bound: f64,
    ) -> Result<Self> {
        let coordinates: usize = sizes.iter().sum();
        if count > coordinates {
            return Err(too_many(count, coordinates));
        }
        let mut canaries = Self::new(count, rate, seed)?;
        canaries.place(scales, sizes, &vec![bound; sizes.len()])?;
        Ok(canaries)
    }

    /// Which canaries are in the training set.
    pub fn included(&self) -> &[bool] {
        &self.included
    }

    /// The auditor's scores (higher: more likely in).
    pub fn scores(&self) -> &[f64] {
        &self.scores
    }

    /// Places the canaries on the coordinates of smallest sigma / bound under the noise `scales`
    /// of a step, `sizes` being each tensor's element count and `bounds` its clipping bound.
    pub fn place(&mut self, scales: &[NoiseScale], sizes: &[usize], bounds: &[f64]) -> Result<()> {
        let sigmas = host_sigmas(scales, sizes, |_| true);
        let mut coordinates: Vec<(f64, usize, usize)> = sigmas
            .iter()
            .zip(bounds)
            .enumerate()
            .flat_map(|(t, (s, &b))| s.iter().enumerate().map(move |(i, &sigma)| (f64::from(sigma) / b, t, i)))
            .collect();
        let m = self.included.len();
        if m > coordinates.len() {
            return Err(too_many(m, coordinates.len()));
        }
        // Stable: ties (uniform noise) keep the model's order.
        coordinates.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.placement = coordinates[..m]
            .iter()
            .map(|&(_, tensor, index)| Placement { tensor, index, value: bounds[tensor] })
            .collect();
        Ok(())
    }

    /// The mean gradient `w` over `n` records with the included canaries added as records.
    fn mean_with_canaries(&self, w: Vec<Tensor<1>>, n: usize) -> Vec<Tensor<1>> {
        if self.placement.is_empty() {
            return w;
        }
        let inside = self.included.iter().filter(|&&b| b).count();
        let total = (n + inside) as f64;
        let inside_placements = self.placement.iter().zip(&self.included).filter(|(_, inc)| **inc).map(|(p, _)| *p);
        let deltas = self.deltas(&w, inside_placements);
        w.into_iter()
            .zip(deltas)
            .map(|(t, d)| {
                let t = t.mul_scalar(n as f64 / total);
                match d {
                    Some(d) => t + d.div_scalar(total),
                    None => t,
                }
            })
            .collect()
    }

    /// Per tensor, the host-built tensor holding each given canary's value at its coordinate
    /// (None where no canary falls).
    fn deltas(&self, like: &[Tensor<1>], placements: impl Iterator<Item = Placement>) -> Vec<Option<Tensor<1>>> {
        let mut host: Vec<Option<Vec<f32>>> = vec![None; like.len()];
        for p in placements {
            let n = like[p.tensor].shape().num_elements();
            host[p.tensor].get_or_insert_with(|| vec![0.0; n])[p.index] += p.value as f32;
        }
        host.into_iter().zip(like).map(|(h, t)| h.map(|v| vector(v, &t.device()))).collect()
    }

    /// Adds the canaries that are in and drawn into this lot to the clipped sums, after noting
    /// the other records' sum at every canary's coordinate.
    fn inject(&mut self, sums: &mut [Tensor<1>]) -> Result<()> {
        if self.placement.is_empty() {
            return Err(EngineError::invalid("audit canaries", "not placed before the first step"));
        }
        let host = self.read(sums);
        let rate = self.rate;
        let sampled: Vec<bool> = self.included.iter().map(|&inc| inc && self.rng.random_bool(rate)).collect();
        self.pending = self.placement.iter().map(|p| host[p.tensor][p.index]).collect();
        let drawn = self.placement.iter().zip(&sampled).filter(|(_, s)| **s).map(|(p, _)| *p);
        let deltas = self.deltas(sums, drawn);
        for (sum, delta) in sums.iter_mut().zip(deltas) {
            if let Some(d) = delta {
                *sum = sum.clone() + d;
            }
        }
        Ok(())
    }

    /// Scores the step from its released `noisy` tensors ((sum + noise) * `scale`) and `scales`.
    fn observe(&mut self, noisy: &[Tensor<1>], scales: &[NoiseScale], scale: f32) -> Result<()> {
        if self.pending.len() != self.placement.len() {
            return Err(EngineError::invalid("audit canaries", "a release observed without an injection"));
        }
        let host = self.read(noisy);
        let sizes: Vec<usize> = noisy.iter().map(|t| t.shape().num_elements()).collect();
        let sigmas = host_sigmas(scales, &sizes, |t| !host[t].is_empty());
        for ((score, p), before) in self.scores.iter_mut().zip(&self.placement).zip(&self.pending) {
            let x = host[p.tensor][p.index] / f64::from(scale) - before;
            let sigma = f64::from(sigmas[p.tensor][p.index]);
            let v = p.value;
            *score += log_mixture(self.rate, (v * x - v * v / 2.0) / (sigma * sigma));
        }
        self.pending.clear();
        Ok(())
    }

    /// The host values of the tensors that hold a canary (empty for the others).
    fn read(&self, tensors: &[Tensor<1>]) -> Vec<Vec<f64>> {
        let mut host = vec![Vec::new(); tensors.len()];
        for p in &self.placement {
            if host[p.tensor].is_empty() {
                host[p.tensor] = to_host(&tensors[p.tensor]).into_iter().map(f64::from).collect();
            }
        }
        host
    }
}

/// The canaries run in the step as its hook: injected into the clipped sums, counted in the
/// full-data gradient, scored on each release.
impl StepHook for WhiteBoxCanaries {
    fn add_records(&mut self, sums: &mut [Tensor<1>]) -> Result<()> {
        self.inject(sums)
    }

    fn add_to_mean(&self, w: Vec<Tensor<1>>, n: usize) -> Vec<Tensor<1>> {
        self.mean_with_canaries(w, n)
    }

    fn released(&mut self, released: &[Tensor<1>], scales: &[NoiseScale], scale: f32) -> Result<()> {
        self.observe(released, scales, scale)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A request to audit a run with white-box canaries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AuditRequest {
    /// Canaries m.
    pub canaries: usize,
    /// Confidence of the lower bound (e.g. 0.95).
    pub confidence: f64,
}

/// The one-run audit of a training run: an empirical lower bound on its epsilon.
#[derive(Debug, Clone, Serialize)]
pub struct RunAudit {
    /// The bound, its guesses and canaries.
    pub bound: OneRunBound,
    /// Its confidence.
    pub confidence: f64,
    /// Always "empirical": evidence about the run, never a guarantee.
    pub label: &'static str,
}

impl WhiteBoxCanaries {
    /// The one-run lower bound on epsilon at `delta` from the scores so far.
    pub fn audit(&self, delta: f64, confidence: f64) -> RunAudit {
        RunAudit {
            bound: one_run_bound(&self.scores, &self.included, delta, confidence),
            confidence,
            label: "empirical",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend;
    use burn::tensor::TensorData;

    #[test]
    fn log_mixture_is_the_mixture_likelihood_ratio() {
        for (q, a) in [(0.5, 0.3), (0.01, -4.0), (0.2, 30.0), (1.0, 2.5)] {
            let naive: f64 = (1.0 - q + q * f64::exp(a)).ln();
            assert!((log_mixture(q, a) - naive).abs() < 1e-12, "{q} {a}");
        }
        // No overflow where the naive form has one.
        assert!((log_mixture(0.1, 1000.0) - (0.1f64.ln() + 1000.0)).abs() < 1e-9);
    }

    #[test]
    fn canaries_sit_where_noise_over_bound_is_smallest() {
        let device = backend::cpu().device;
        let sigma = Tensor::<1>::from_data(TensorData::new(vec![3.0f32, 0.5, 2.0, 0.7, 9.0, 0.6], [6]), &device);
        let scales = [NoiseScale::Uniform(1.0), NoiseScale::PerCoordinate(Box::new(sigma))];
        // Ratios: tensor 0 (bound 2): 0.5 everywhere; tensor 1 (bound 1): 3, 0.5, 2, 0.7, 9, 0.6.
        let mut c = WhiteBoxCanaries::new(5, 1.0, Some(1)).unwrap();
        c.place(&scales, &[2, 6], &[2.0, 1.0]).unwrap();
        let got: Vec<(usize, usize)> = c.placement.iter().map(|p| (p.tensor, p.index)).collect();
        assert_eq!(got, [(0, 0), (0, 1), (1, 1), (1, 5), (1, 3)]);
        assert_eq!(c.placement[0].value, 2.0);
        assert!(WhiteBoxCanaries::new(9, 1.0, Some(1)).unwrap().place(&scales, &[2, 6], &[2.0, 1.0]).is_err());
    }

    /// With q = 1 every included canary is in every lot; the score is then the Gaussian log
    /// likelihood ratio of (release / scale - other records' sum), computed here by hand.
    #[test]
    fn scores_are_the_likelihood_ratio_of_the_released_coordinate() {
        let device = backend::cpu().device;
        let m = 6;
        let mut c = WhiteBoxCanaries::new(m, 1.0, Some(4)).unwrap();
        assert!(c.included().iter().any(|&b| b) && c.included().iter().any(|&b| !b));
        let scales = [NoiseScale::Uniform(0.5)];
        c.place(&scales, &[8], &[2.0]).unwrap();
        let other: Vec<f32> = (0..8).map(|i| i as f32 - 3.0).collect();
        let noise: Vec<f32> = vec![0.3, -0.2, 0.9, -1.1, 0.05, 0.4, 7.0, -7.0];
        let scale = 0.25f32;
        let mut sums = vec![vector(other.clone(), &device)];
        c.inject(&mut sums).unwrap();
        let injected = to_host(&sums[0]);
        let released: Vec<f32> = injected.iter().zip(&noise).map(|(s, z)| (s + z) * scale).collect();
        c.observe(&[vector(released, &device)], &scales, scale).unwrap();
        for i in 0..m {
            let v = if c.included()[i] { 2.0 } else { 0.0 };
            assert_eq!(f64::from(injected[i] - other[i]), v, "canary {i} injected");
            let x = f64::from(noise[i]) + v;
            let want = (2.0 * x - 2.0) / 0.25;
            assert!((c.scores()[i] - want).abs() < 1e-5, "canary {i}: {} vs {want}", c.scores()[i]);
        }
        // Coordinates without a canary are untouched.
        assert_eq!(&injected[m..], &other[m..]);
    }
}
