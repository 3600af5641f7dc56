//! `--mechanism optimized-paper`: Xiang et al.'s Algorithm 1 as written. Eq. 12 splits the budget
//! over the steps, the (corrected) per-step condition tau sets the noise, and the solver on the
//! fused device kernel spreads a sigma per coordinate by the full-data gradient w (recomputed
//! every `sensitivity_every` lots) under L2 clipping (one sphere of radius C). Its epsilon is the
//! paper's claim (label paper-bound); beside it, the epsilon of the Gaussian mechanism with the
//! smallest sigma used, labelled none because w is computed from the private data and released
//! into the noise without accounting (docs/MECHANISMS.md, "The optimized additive noise
//! mechanism").

use super::registered::Registered;
use super::{ExpectedMultiplier, Mechanism, MechanismName};
use crate::clipping::Clipping;
use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use crate::privacy::mechanism::allocation::{DataGradient, NoiseAllocation, StepNoise};
use crate::privacy::settings::PrivacySettings;
use crate::tensor_io::to_host;
use burn::tensor::Tensor;
use dp_accounting::paper_bounds::xiang2019;
use dp_accounting::{Accountant, BasicComposition, DpEvent, LotSampling, PrivacyLedger, PrivacyReport};
use dp_kernels::sigma_solver::SolverSchedule;
use dp_kernels::{NoiseScale, sphere_sigma};
use std::sync::Arc;

/// How far (relative) min sigma / alpha may stray from z: f32 rounding in the solver's
/// rescaling, a few ulps.
const SOLVER_TOLERANCE: f64 = 1e-5;

/// The registry's entry: `sensitivity_every`.
pub(super) const REGISTERED: Registered = Registered {
    name: MechanismName::OptimizedPaper,
    options: &["sensitivity_every"],
    build: |options| Ok(Arc::new(OptimizedPaper::every(options.sensitivity_every.unwrap_or(1)))),
};

/// Xiang et al.'s Algorithm 1, recomputing w every `every` lots.
pub struct OptimizedPaper {
    every: u64,
}

impl OptimizedPaper {
    /// Algorithm 1 recomputing the full-data gradient every `every` lots (1: every lot).
    pub fn every(every: u64) -> Self {
        Self { every }
    }
}

impl Mechanism for OptimizedPaper {
    fn name(&self) -> &'static str {
        "optimized-paper"
    }

    fn validate(&self, config: &PrivacySettings, clipping: Clipping) -> Result<()> {
        if clipping == Clipping::PerLayer {
            return Err(EngineError::invalid(
                "clipping",
                "optimized-paper is Xiang et al.'s Algorithm 1 as written: flat L2 clipping",
            ));
        }
        if config.target_epsilon().is_none() {
            return Err(EngineError::invalid(
                "privacy",
                "optimized-paper derives its noise from the budget (Eq. 12): give PrivacyConfig::with_target_epsilon, not PrivacyConfig::with_noise_multiplier",
            ));
        }
        if self.every == 0 {
            return Err(EngineError::invalid("sensitivity-every", "must be at least 1"));
        }
        Ok(())
    }

    fn noise_multiplier(&self, config: &PrivacySettings, sample_rate: f64, steps: u64) -> Result<Option<f64>> {
        let target = config.target_epsilon().ok_or_else(|| EngineError::invalid("privacy", "no target epsilon"))?;
        let budget = xiang2019::per_step_budget(target, config.delta, sample_rate, steps)?;
        let (tau, _) = xiang2019::tau_corrected(budget)?;
        Ok(Some(xiang2019::noise_multiplier_for_tau(tau)?))
    }

    /// min sigma / alpha: the solver's last step rescales sigma onto the constraint, so min sigma
    /// is alpha z up to the f32 arithmetic of the device solver.
    fn ledger_multiplier(&self, z: f64) -> ExpectedMultiplier {
        ExpectedMultiplier { z, tolerance: SOLVER_TOLERANCE }
    }

    fn allocation(&self, z: f64, config: &PrivacySettings, _table: &ParamTable) -> Box<dyn NoiseAllocation> {
        Box::new(Sphere { alpha: config.clip_norm, tau: 1.0 / (z * z), every: self.every, current: None })
    }

    /// The Gaussian release at min sigma / alpha, and the use of w that no analysis covers.
    fn step_event(&self, z: Option<f64>, sample_rate: f64, sampling: LotSampling) -> Result<DpEvent> {
        let z = z.ok_or_else(|| EngineError::privacy("optimized-paper adds noise, but no multiplier was set"))?;
        Ok(DpEvent::Composed {
            events: vec![
                DpEvent::sampled_gaussian(z, sample_rate, sampling)?,
                DpEvent::Unaccounted { what: "Xiang et al.'s w, the full-data gradient, shapes the noise".into() },
            ],
        })
    }

    /// Eq. 12 spends the budget evenly: epsilon * sqrt(steps / planned) after `steps` steps, a
    /// paper-bound release.
    fn privacy(&self, config: &PrivacySettings, ledger: &PrivacyLedger, planned: u64) -> Result<PrivacyReport> {
        let target = config.target_epsilon().ok_or_else(|| EngineError::invalid("privacy", "no target epsilon"))?;
        let done = ledger.total_steps() as f64 / planned.max(1) as f64;
        let mut claim = PrivacyLedger::new();
        if done > 0.0 {
            let epsilon = target * done.sqrt();
            claim.record_event(
                DpEvent::PaperBound { paper: "xiang2019-eq12".into(), epsilon, delta: config.delta },
                1,
            )?;
        }
        Ok(BasicComposition.epsilon(&claim, config.delta)?)
    }

    fn notes(&self) -> Vec<String> {
        vec![
            "optimized-paper: the epsilon is the paper's claim (Eq. 12 with the corrected tau), label paper-bound".into(),
            "under L2 clipping the worst case is alpha^2 / min sigma^2, so the true guarantee is that of the Gaussian mechanism with noise multiplier min sigma / alpha; the coordinates with larger sigma only add noise".into(),
            "w is the gradient of the private training data, released into the noise without accounting: the sigma readout is labelled none".into(),
        ]
    }
}

/// One sigma per coordinate from the paper's solver, and the current one.
struct Sphere {
    /// Clipping bound alpha = C.
    alpha: f64,
    /// Per-step condition tau (corrected).
    tau: f64,
    /// Recompute w every this many lots.
    every: u64,
    /// Per-tensor sigma of the current w, and the noise multiplier min sigma / alpha.
    current: Option<(Vec<Tensor<1>>, f64)>,
}

impl NoiseAllocation for Sphere {
    fn step_noise(&mut self, step: u64, table: &ParamTable, data_gradient: &mut DataGradient<'_>) -> Result<StepNoise> {
        if self.current.is_none() || step.is_multiple_of(self.every) {
            let w = data_gradient()?;
            let flat = Tensor::cat(w.into_iter().map(|t| t.abs()).collect(), 0);
            let sigma = sphere_sigma(flat, self.alpha, self.tau, &SolverSchedule::default())
                .map_err(EngineError::Unsupported)?;
            let least = f64::from(sigma.clone().min().into_scalar::<f32>());
            if !(least.is_finite() && least > 0.0) {
                return Err(EngineError::privacy(format!("the solver returned a minimum sigma of {least}")));
            }
            let mut start = 0;
            let per_tensor = table
                .params()
                .iter()
                .map(|p| {
                    start += p.len();
                    sigma.clone().slice(start - p.len()..start)
                })
                .collect();
            self.current = Some((per_tensor, least / self.alpha));
        }
        let (sigma, z) = self.current.as_ref().ok_or_else(|| EngineError::privacy("no sigma"))?;
        Ok(StepNoise {
            scales: sigma.iter().map(|s| NoiseScale::PerCoordinate(Box::new(s.clone()))).collect(),
            noise_multiplier: *z,
        })
    }

    fn is_stateful(&self) -> bool {
        true
    }

    fn state(&self) -> Option<&[Tensor<1>]> {
        self.current.as_ref().map(|(sigma, _)| sigma.as_slice())
    }

    /// Refused unless every sigma is positive and finite; the multiplier is read as the step
    /// reads it: the least f32 sigma, divided by alpha.
    fn restore(&mut self, state: Vec<Tensor<1>>) -> Result<()> {
        let host: Vec<f32> = state.iter().flat_map(to_host).collect();
        let least = host.iter().copied().map(f64::from).fold(f64::INFINITY, f64::min);
        let finite = host.iter().all(|s| s.is_finite());
        if !(finite && least > 0.0) {
            return Err(EngineError::privacy(format!(
                "a sigma of {least} (or one that is not finite) cannot have been used"
            )));
        }
        self.current = Some((state, least / self.alpha));
        Ok(())
    }

    fn current_multiplier(&self) -> Option<f64> {
        self.current.as_ref().map(|(_, z)| *z)
    }
}
