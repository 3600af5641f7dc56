//! The device kernels and one DP step checked on the device a user has, against their CPU
//! references (`dptrain selftest`): whether a GPU, its driver, or a Burn or CubeCL release
//! computes what the privacy analysis assumes (the noise stream and its normal law, Laplacian
//! smoothing, the sigma solver, im2col, per-example norms and clipped sums). Each check is one
//! measured deviation and the tolerance it must stay within: the oracle tests' (docs/KERNELS.md).
//! On a CPU backend the kernels are their own references, so only the DP step compares two
//! computations there; the self-test is for CubeCL devices (wgpu, cuda).

mod dp_step;
pub mod naive;
mod noise;
mod patches;
mod smoke;
mod smoothing;
mod solver;

pub use smoke::smoke_run;

use crate::backend::{DeviceChoice, DeviceError, SelectedDevice};
use burn::tensor::{Device, Tensor};
use serde::Serialize;

/// One check: what was compared, the deviation measured and the largest that passes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// What was compared, on how much data, and how the deviation is measured.
    pub name: String,
    /// The deviation (None when the computation itself failed: see `error`).
    pub measured: Option<f64>,
    /// The largest deviation that passes.
    pub tolerance: f64,
    /// Why the device could not compute the check's values.
    pub error: Option<String>,
}

impl Check {
    /// A measured check.
    fn new(name: impl Into<String>, measured: f64, tolerance: f64) -> Self {
        Self { name: name.into(), measured: Some(measured), tolerance, error: None }
    }

    /// True when the deviation is finite and within the tolerance.
    pub fn passed(&self) -> bool {
        self.error.is_none() && self.measured.is_some_and(|m| m.is_finite() && m <= self.tolerance)
    }
}

/// A group of checks that share their device work (one kernel, or the DP step).
pub struct Suite {
    /// What it checks.
    pub name: &'static str,
    /// Its checks on a device, every device output passed through the tap before it is compared;
    /// an error is a computation the device refused or cut short.
    pub run: fn(&Device, &dyn Tap) -> Result<Vec<Check>, String>,
}

/// Every suite, in the order `dptrain selftest` runs them.
pub const SUITES: &[Suite] = &[
    Suite { name: "noise", run: noise::checks },
    Suite { name: "smoothing", run: smoothing::checks },
    Suite { name: "solver", run: solver::checks },
    Suite { name: "im2col", run: patches::checks },
    Suite { name: "dp-step", run: dp_step::checks },
];

/// Sees each device output before it is compared: [`Untouched`] in a real self-test; a test of
/// the self-test plants a fault here and expects it to be caught.
pub trait Tap {
    /// May alter `values`, the device's output for the check named `check`.
    fn output(&self, check: &str, values: &mut [f64]);
}

/// The tap of a real self-test: every output as the device computed it.
pub struct Untouched;

impl Tap for Untouched {
    fn output(&self, _check: &str, _values: &mut [f64]) {}
}

/// Runs `suite` on `device`; a suite that errs is one failed check that says why.
pub fn run_suite(suite: &Suite, device: &Device, tap: &dyn Tap) -> Vec<Check> {
    (suite.run)(device, tap).unwrap_or_else(|error| {
        vec![Check { name: suite.name.to_string(), measured: None, tolerance: 0.0, error: Some(error) }]
    })
}

/// Every check of every suite on `device`.
pub fn run(device: &Device, tap: &dyn Tap) -> Vec<Check> {
    SUITES.iter().flat_map(|suite| run_suite(suite, device, tap)).collect()
}

/// Opening a device the way a run should: a GPU, named or found by `auto`, is proven with the
/// smoke run before it is taken (`auto` passes over one that fails; a named one is refused).
pub trait OpenDevice {
    /// The device, a GPU proven (see [`smoke_run`]).
    fn open(self) -> Result<SelectedDevice, DeviceError>;
}

impl OpenDevice for DeviceChoice {
    fn open(self) -> Result<SelectedDevice, DeviceError> {
        self.open_with(&|d| smoke_run(&d.device, &Untouched))
    }
}

/// A device tensor's values on the host as f64, through the tap under `check`'s name.
fn observed<const D: usize>(t: &Tensor<D>, check: &str, tap: &dyn Tap) -> Vec<f64> {
    let mut values: Vec<f64> = crate::tensor_io::to_host(t).into_iter().map(f64::from).collect();
    tap.output(check, &mut values);
    values
}

/// The largest |got - want| / max(floor, |want|), NaN counted as infinite; infinite when the
/// lengths differ.
fn worst_relative(got: &[f64], want: &[f64], floor: f64) -> f64 {
    worst(got, want, |w| w.abs().max(floor))
}

/// The largest |got - want| relative to the largest |want| (an error measured against the
/// vector's scale, as the smoothing and clipped-sum bounds are stated; absolute for zeros).
fn worst_against_peak(got: &[f64], want: &[f64]) -> f64 {
    let peak = want.iter().map(|w| w.abs()).fold(0.0, f64::max);
    worst(got, want, |_| if peak > 0.0 { peak } else { 1.0 })
}

/// The largest |got - want| / scale(want), NaN counted as infinite; infinite when the lengths
/// differ.
fn worst(got: &[f64], want: &[f64], scale: impl Fn(f64) -> f64) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / scale(*w))
        .map(|e| if e.is_nan() { f64::INFINITY } else { e })
        .fold(0.0, f64::max)
}

/// Deterministic values in [-1, 1) for inputs (a fixed linear congruential sequence: the same on
/// every machine, with no dependence on a random number generator's version).
fn inputs(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fault planted in a device output.
    type Fault = fn(&mut [f64]);

    /// A tap that plants `fault` in one named output.
    struct Plant {
        check: &'static str,
        fault: Fault,
    }

    impl Tap for Plant {
        fn output(&self, check: &str, values: &mut [f64]) {
            if check == self.check {
                (self.fault)(values);
            }
        }
    }

    fn failed(checks: &[Check]) -> Vec<&str> {
        checks.iter().filter(|c| !c.passed()).map(|c| c.name.as_str()).collect()
    }

    /// Every check passes on the CPU backends (each kernel against its reference, the DP step on
    /// flex against the naive loop on ndarray) and on wgpu (lavapipe in CI).
    #[test]
    fn every_check_passes_on_every_backend() {
        let mut devices = vec![crate::backend::cpu().device, crate::backend::ndarray().device];
        devices.extend(dp_kernels::wgpu_probe::wgpu_for_tests());
        for device in devices {
            let checks = run(&device, &Untouched);
            assert!(checks.len() >= 15, "{} checks", checks.len());
            assert!(failed(&checks).is_empty(), "{device:?}: {checks:#?}");
        }
    }

    /// A fault planted in a device output fails its suite (on the CPU, where the device's output
    /// is exactly the reference, so that only the planted fault can fail it).
    #[test]
    fn a_planted_fault_fails_its_check() {
        let device = crate::backend::cpu().device;
        // One value off by a little, or a whole draw off in law (a 1% larger sigma, a mean
        // moved by a hundredth of a sigma, a heavier tail).
        let faults: [(&str, Fault); 12] = [
            (noise::WORDS, |v| v[7] += 1.0),
            (noise::NORMALS, |v| v[v.len() / 2] += 2e-5),
            (noise::DRAWS, |v| v.iter_mut().for_each(|z| *z *= 1.01)),
            (noise::DRAWS, |v| v.iter_mut().for_each(|z| *z += 0.01)),
            (noise::DRAWS, |v| v.iter_mut().step_by(1000).for_each(|z| *z = 5.0)),
            (noise::FUSED, |v| v[0] *= 1.0 + 1e-4),
            (smoothing::SMOOTHED, |v| v[v.len() - 1] += 1e-3),
            (solver::SIGMA, |v| v[v.len() / 2] *= 1.01),
            (solver::SIGMA, |v| v.iter_mut().for_each(|s| *s *= 1.0 + 1e-5)),
            (patches::PATCHES, |v| v[v.len() / 3] += 1e-6),
            (dp_step::NORMS, |v| v[1] *= 1.001),
            (dp_step::SUMS, |v| v[v.len() / 2] += 1e-3),
        ];
        for (check, fault) in faults {
            let name = check.split(':').next().expect("a suite prefix");
            let suite = SUITES.iter().find(|s| s.name == name).expect("the tap names its suite");
            let checks = run_suite(suite, &device, &Plant { check, fault });
            assert!(checks.iter().all(|c| c.name.starts_with(name)), "{check}: {checks:?}");
            assert!(!failed(&checks).is_empty(), "{check}: the planted fault went unnoticed: {checks:#?}");
        }
    }

    /// The comparisons count NaN and length mismatches as failures.
    #[test]
    fn comparisons_fail_closed() {
        assert_eq!(worst_relative(&[f64::NAN], &[1.0], 1.0), f64::INFINITY);
        assert_eq!(worst_relative(&[1.0], &[1.0, 2.0], 1.0), f64::INFINITY);
        assert!(!Check::new("x", f64::NAN, 1.0).passed());
        assert!(Check::new("x", 1.0, 1.0).passed() && !Check::new("x", 1.5, 1.0).passed());
    }
}
