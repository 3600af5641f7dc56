//! The fused sigma-solver kernel against its f64 CPU reference and against the closed form: under
//! one sphere (L2 clipping) the exact solution is the uniform alpha / sqrt(tau)
//! (docs/MECHANISMS.md, "The optimized additive noise mechanism").

use burn::tensor::{Device, Tensor, TensorData};
use dp_kernels::sigma_solver::{Block, SolverSchedule, solve};
use dp_kernels::sphere_sigma;
use dp_kernels::wgpu_probe::wgpu_for_tests;

#[allow(deprecated)]
fn cpu() -> Device {
    Device::ndarray()
}

/// Uneven weights spanning three orders of magnitude, some zero.
fn weights(d: usize) -> Vec<f32> {
    (0..d).map(|i| if i % 11 == 5 { 0.0 } else { 0.01 + (i * 37 % 101) as f32 / 10.0 }).collect()
}

fn sigma_on(device: &Device, w: &[f32], alpha: f64, tau: f64, schedule: &SolverSchedule) -> Vec<f64> {
    let t = Tensor::<1>::from_data(TensorData::new(w.to_vec(), [w.len()]), device);
    let s = sphere_sigma(t, alpha, tau, schedule).expect("solver");
    s.to_data().try_into_vec_as::<f32>().expect("f32").into_iter().map(f64::from).collect()
}

fn worst_rel(a: &[f64], b: &[f64]) -> f64 {
    // NaN counts as the worst (f64::max would skip it).
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / y.abs())
        .map(|e| if e.is_nan() { f64::INFINITY } else { e })
        .fold(0.0, f64::max)
}

#[test]
fn device_solver_follows_the_reference_and_is_exactly_feasible() {
    let (alpha, tau) = (1.5, 0.04);
    let schedule = SolverSchedule::default();
    let mut devices = vec![cpu()];
    devices.extend(wgpu_for_tests());
    // 70,000 coordinates take two launches (the loop budget per launch).
    for d in [1, 3, 257, 1000, 70_000] {
        let w = weights(d);
        let w64: Vec<f64> = w.iter().map(|&x| f64::from(x)).collect();
        let reference = solve(&w64, &[Block { start: 0, len: d, radius: alpha }], tau, &schedule).expect("reference");
        for device in &devices {
            let got = sigma_on(device, &w, alpha, tau, &schedule);
            let err = worst_rel(&got, &reference);
            assert!(err < 1e-4, "d = {d} on {device:?}: {err:e} from the f64 reference");
            let least = got.iter().copied().fold(f64::INFINITY, f64::min);
            assert!(
                (alpha / least - tau.sqrt()).abs() < 1e-6 * tau.sqrt(),
                "d = {d}: alpha / min sigma = {}",
                alpha / least
            );
        }
    }
}

#[test]
fn device_solver_converges_to_the_uniform_sigma() {
    let (alpha, tau) = (2.0f64, 0.3f64);
    let schedule = SolverSchedule { iterations: 2000, ..SolverSchedule::default() };
    let uniform = alpha / tau.sqrt();
    let mut devices = vec![cpu()];
    devices.extend(wgpu_for_tests());
    for device in &devices {
        let w = weights(300);
        let got = sigma_on(device, &w, alpha, tau, &schedule);
        // Wherever w_j != 0; a coordinate that costs nothing may take any sigma above it.
        let (paid, free): (Vec<_>, Vec<_>) = got.iter().zip(&w).partition(|(_, w)| **w > 0.0);
        let paid: Vec<f64> = paid.into_iter().map(|(s, _)| *s).collect();
        let err = worst_rel(&paid, &vec![uniform; paid.len()]);
        assert!(err < 1e-3, "{device:?}: {err:e} from alpha / sqrt(tau)");
        assert!(free.iter().all(|(s, _)| **s >= uniform * (1.0 - 1e-6)), "{device:?}: a free sigma below uniform");
    }
}

#[test]
fn solver_refuses_bad_problems() {
    let schedule = SolverSchedule::default();
    let empty = Tensor::<1>::from_data(TensorData::new(Vec::<f32>::new(), [0]), &cpu());
    assert!(sphere_sigma(empty, 1.0, 1.0, &schedule).is_err());
    for (alpha, tau) in [(0.0, 1.0), (1.0, 0.0), (1.0, f64::NAN), (f64::INFINITY, 1.0)] {
        let w = Tensor::<1>::from_data(TensorData::new(vec![1.0f32; 4], [4]), &cpu());
        assert!(sphere_sigma(w, alpha, tau, &schedule).is_err(), "alpha {alpha}, tau {tau}");
    }
}
