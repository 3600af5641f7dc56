//! The sigma solver of Xiang et al. (Eq. 11) for one sphere of radius alpha (the paper's L2 clipping)
//! as a single fused CubeCL kernel: one cube of 256 units runs every iteration, each unit owning
//! the coordinates j = unit, unit + 256, ..., so the only communication is the three sums per
//! iteration (h, the Delta gradient's norm and Delta's norm), reduced in shared memory; large
//! problems run in several launches so that no shader exceeds lavapipe's loop cap. The
//! arithmetic is that of `sigma_solver::solve` (the CPU reference, in f64) step for step.

use crate::cube_output::contiguous_output;
use crate::sigma_solver::SolverSchedule;
use burn::backend::DType;
use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::cubecl::{CubeCount, CubeDim};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;

/// Units in the solver's one cube.
const UNITS: usize = 256;

/// Levels of the reduction tree (2^LEVELS = UNITS).
const LEVELS: usize = 8;

/// The smallest normal f32, the floor of divisors (as f64::MIN_POSITIVE on the host).
const TINY: f32 = f32::MIN_POSITIVE;

/// The problem's constants and the iteration schedule.
#[derive(CubeLaunch, CubeType)]
pub struct SolverArgs {
    alpha: f32,
    tau: f32,
    sigma_step: f32,
    delta_step: f32,
    sharpness: f32,
    mu_growth: f32,
    mu_cap: f32,
}

/// The sum (or, with `min`, the minimum) over the cube of each unit's `value`, every unit getting
/// it: an unrolled tree in shared memory, the cube meeting after every level and before the slots
/// can be overwritten.
#[cube]
fn cube_reduce(value: f32, shared: &mut Shared<[f32]>, #[comptime] min: bool) -> f32 {
    let unit = UNIT_POS as usize;
    shared[unit] = value;
    sync_cube();
    #[unroll]
    for level in 1..LEVELS + 1 {
        let stride = comptime!(UNITS >> level);
        if unit < stride {
            let a = shared[unit];
            let b = shared[unit + stride];
            if min {
                shared[unit] = a.min(b);
            } else {
                shared[unit] = a + b;
            }
        }
        sync_cube();
    }
    let total = shared[0usize];
    sync_cube();
    total
}

/// This unit's share of the weights' sum; on the first launch (`start`) it also sets its
/// coordinates to the uniform point (log sigma = ln `uniform`, Delta on the sphere of `alpha`).
#[cube]
fn unit_weight(
    weights: &Tensor<f32>,
    delta: &mut Tensor<f32>,
    sigma: &mut Tensor<f32>,
    start: bool,
    alpha: f32,
    uniform: f32,
) -> f32 {
    let d = weights.len();
    let mut weight = 0.0f32;
    let mut j = UNIT_POS as usize;
    while j < d {
        if start {
            sigma[j] = uniform.ln();
            delta[j] = alpha / f32::cast_from(d).sqrt();
        }
        weight += weights[j];
        j += UNITS;
    }
    weight
}

/// Iterations `first .. first + count` of the solver for min sum w_j sigma_j s.t.
/// alpha^2 / min sigma^2 <= tau; `sigma` holds log sigma between launches and sigma (exactly
/// feasible) after the `finish` launch; `delta` is the ascent's state; the first launch starts
/// both from the uniform point. `done[0]` counts the iterations (and the finish) that ran to their
/// end, so that a device that cuts loops short (lavapipe caps a shader's loop iterations) is caught.
#[cube(launch)]
fn sphere_solver_kernel(
    weights: &Tensor<f32>,
    delta: &mut Tensor<f32>,
    sigma: &mut Tensor<f32>,
    done: &mut Tensor<u32>,
    args: SolverArgs,
    first: u32,
    count: u32,
    finish: u32,
) {
    let mut shared = Shared::<[f32]>::new_slice(UNITS);
    let d = weights.len();
    let unit = UNIT_POS as usize;
    let uniform = args.alpha / args.tau.sqrt();
    let weight = unit_weight(weights, delta, sigma, first == 0, args.alpha, uniform);
    // mu starts at the objective's scale and grows geometrically up to mu_cap times that.
    let mu0 = (cube_reduce(weight, &mut shared, false) * uniform).max(TINY);
    for t in first..first + count {
        let mu = mu0 * (f32::cast_from(t) * args.mu_growth.ln()).exp().min(args.mu_cap);
        // h and the norm of the Delta gradient 2 Delta / sigma^2.
        let mut h_part = 0.0f32;
        let mut g_part = 0.0f32;
        let mut j = unit;
        while j < d {
            let s = sigma[j].exp();
            let x = delta[j];
            h_part += x * x / (s * s);
            let g = 2.0 * x / (s * s);
            g_part += g * g;
            j += UNITS;
        }
        let h = cube_reduce(h_part, &mut shared, false);
        let gnorm = cube_reduce(g_part, &mut shared, false).sqrt().max(TINY);
        let z = args.sharpness * (h / args.tau - 1.0);
        // sigmoid'(z) = e / (1 + e)^2 with e = exp(-|z|): 1 - sigmoid(z) would round to 0 in f32.
        let e = (-z.abs()).exp();
        let p = mu * e / ((1.0 + e) * (1.0 + e)) * args.sharpness / args.tau;
        // Ascent on Delta, then its projection back onto the sphere.
        let mut n_part = 0.0f32;
        let mut j = unit;
        while j < d {
            let s = sigma[j].exp();
            let x = delta[j] + args.delta_step * args.alpha * (2.0 * delta[j] / (s * s)) / gnorm;
            delta[j] = x;
            n_part += x * x;
            j += UNITS;
        }
        let shrink = args.alpha / cube_reduce(n_part, &mut shared, false).sqrt();
        // Normalised descent on log sigma.
        let step = args.sigma_step / (1.0 + f32::cast_from(t) / 10.0);
        let mut j = unit;
        while j < d {
            let x = delta[j] * shrink;
            delta[j] = x;
            let s = sigma[j].exp();
            let a = weights[j] * s;
            let b = p * 2.0 * x * x / (s * s);
            if a + b > 0.0 {
                sigma[j] -= step * (a - b) / (a + b);
            }
            j += UNITS;
        }
        if unit == 0 {
            done[0usize] += 1u32;
        }
    }
    if finish != 0 {
        scale_to_feasible(sigma, &mut shared, uniform);
        if unit == 0 {
            done[0usize] += 1u32;
        }
    }
}

/// Exact feasibility after the last iteration: log sigma turned into sigma scaled so that
/// alpha^2 / min sigma^2 = tau (`uniform` = alpha / sqrt(tau)).
#[cube]
fn scale_to_feasible(sigma: &mut Tensor<f32>, shared: &mut Shared<[f32]>, uniform: f32) {
    let d = sigma.len();
    let unit = UNIT_POS as usize;
    let mut least = f32::max_value();
    let mut j = unit;
    while j < d {
        least = least.min(sigma[j]);
        j += UNITS;
    }
    let scale = uniform / cube_reduce(least, shared, true).exp();
    let mut j = unit;
    while j < d {
        sigma[j] = sigma[j].exp() * scale;
        j += UNITS;
    }
}

/// Loop iterations one launch may run per unit; lavapipe stops a shader at 65,535.
const LOOP_BUDGET: usize = 30_000;

/// The solver on the device: sigma [d] for `weights` [d] (non-negative), one sphere of radius
/// `alpha`, condition `tau`, in launches of as many iterations as fit the loop budget; also the
/// number of iterations (plus one for the finish) that ran to their end, to check on the host.
pub fn sphere_sigma(weights: CubeTensor, alpha: f32, tau: f32, schedule: &SolverSchedule) -> (CubeTensor, CubeTensor) {
    let weights = into_contiguous(weights);
    let shape = weights.meta.shape().clone();
    let d = shape.num_elements();
    let (client, device) = (weights.client.clone(), weights.device.clone());
    let delta = contiguous_output(&weights, shape.clone(), DType::F32);
    let sigma = contiguous_output(&weights, shape, DType::F32);
    let done = burn_cubecl::ops::numeric::zeros_client(client.clone(), device, [1].into(), DType::U32);
    let per_unit = d.div_ceil(UNITS);
    let per_launch = (LOOP_BUDGET / (3 * per_unit + 1)).max(1);
    let mut first = 0;
    loop {
        let count = per_launch.min(schedule.iterations - first);
        let finish = first + count == schedule.iterations;
        let args = SolverArgsLaunch::new(
            alpha,
            tau,
            schedule.sigma_step as f32,
            schedule.delta_step as f32,
            schedule.sharpness as f32,
            schedule.mu_growth as f32,
            schedule.mu_cap as f32,
        );
        sphere_solver_kernel::launch(
            &client,
            CubeCount::Static(1, 1, 1),
            CubeDim::new_1d(UNITS as u32),
            weights.clone().into_tensor_arg(),
            delta.clone().into_tensor_arg(),
            sigma.clone().into_tensor_arg(),
            done.clone().into_tensor_arg(),
            args,
            first as u32,
            count as u32,
            u32::from(finish),
        );
        first += count;
        if finish {
            return (sigma, done);
        }
    }
}
