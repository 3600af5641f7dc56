//! The kernels on Burn tensors: a tensor on a CubeCL device (wgpu) runs the device kernel; a tensor
//! on a CPU backend (flex, or the ndarray reference) runs the CPU reference on the same random
//! words, so both backends draw the same noise for the same key. Autodiff tensors are refused:
//! noise and smoothing act on released gradients, never inside a graph.
//!
//! On wgpu, Burn's fusion wraps the CubeCL backend: a kernel's input is resolved from the fusion
//! stream (the operations queued before it run, fused), the kernel runs on the CubeCL tensor, and
//! its output enters the stream again as an initialised tensor, so the operations after it fuse.

use crate::chacha::{self, StreamPosition};
use crate::gaussian;
use crate::im2col::Patches;
use crate::sigma_solver::{self, Block, SolverSchedule};
use crate::smoothing::LaplacianSmoothing;
#[cfg(feature = "wgpu")]
use crate::{cube_im2col, cube_noise, cube_smoothing, cube_solver};
use burn::backend::Flex;
#[cfg(feature = "wgpu")]
use burn::backend::fusion::Client;
#[cfg(feature = "wgpu")]
use burn::backend::fusion::stream::StreamId;
#[cfg(feature = "wgpu")]
use burn::backend::fusion::{FusionBackend, FusionTensor, NoOp};
#[cfg(feature = "wgpu")]
use burn::backend::ir::{BackendIr, InitOperationIr, OperationIr, OperationOutput};
#[cfg(feature = "wgpu")]
use burn::backend::{Cube, TensorMetadata};
#[cfg(feature = "wgpu")]
use burn::tensor::Int;
use burn::tensor::{Device, Tensor, TensorData};
#[cfg(feature = "wgpu")]
use burn_cubecl::CubeBackend;
#[cfg(feature = "wgpu")]
use burn_cubecl::tensor::CubeTensor;

/// The fusion runtime of the CubeCL backend.
#[cfg(feature = "wgpu")]
type Runtime = <CubeBackend as FusionBackend>::FusionRuntime;

/// Where a tensor lives, as far as the kernels care (a build without the `wgpu` feature has only
/// the host).
#[cfg_attr(
    feature = "wgpu",
    expect(clippy::large_enum_variant, reason = "one short-lived value per kernel call, moved once")
)]
enum Placement<const D: usize> {
    /// On a CubeCL device, resolved from its fusion stream.
    #[cfg(feature = "wgpu")]
    Cube(OnCube),
    /// On a CPU backend.
    Host(Tensor<D>),
}

/// A tensor resolved from its fusion stream, with the stream that takes the kernel's outputs back.
#[cfg(feature = "wgpu")]
struct OnCube {
    tensor: CubeTensor,
    stream: FusionStream,
}

/// The fusion stream of a kernel's inputs and outputs.
#[cfg(feature = "wgpu")]
struct FusionStream {
    client: Client<Runtime>,
}

/// Finds the backend of `t`, or says why the kernels cannot take it.
#[allow(deprecated)]
fn place<const D: usize>(t: Tensor<D>) -> Result<Placement<D>, String> {
    #[cfg(feature = "wgpu")]
    if let Ok(fused) = t.clone().try_into_primitive::<Cube>() {
        let stream = FusionStream { client: fused.client.clone() };
        return Ok(Placement::Cube(OnCube { tensor: stream.resolve(fused), stream }));
    }
    if t.clone().try_into_primitive::<Flex>().is_ok() {
        return Ok(Placement::Host(t));
    }
    #[cfg(feature = "ndarray")]
    if t.clone().try_into_primitive::<burn::backend::NdArray>().is_ok() {
        return Ok(Placement::Host(t));
    }
    Err("the DP kernels take tensors on wgpu, flex or ndarray, outside autodiff".into())
}

#[cfg(feature = "wgpu")]
impl FusionStream {
    /// The CubeCL tensor behind a fused one, after the operations queued before it have run.
    fn resolve(&self, t: FusionTensor<Runtime>) -> CubeTensor {
        self.client.resolve_tensor_float::<CubeBackend>(t)
    }

    /// A kernel's output handed to the fusion stream as an initialised tensor, wrapped by `wrap`.
    fn enter<T>(&self, t: CubeTensor, wrap: impl FnOnce(FusionTensor<Runtime>) -> T) -> T {
        let (shape, dtype) = (t.shape(), t.dtype());
        let handle = CubeBackend::float_tensor_handle(t);
        let init = InitOperationIr::create(shape, dtype, || self.client.register_tensor_handle(handle));
        wrap(self.client.register(StreamId::current(), OperationIr::Init(init), NoOp::<CubeBackend>::new()).output())
    }

    /// A float kernel output as a fused tensor.
    fn float<const D: usize>(&self, t: CubeTensor) -> Tensor<D> {
        self.enter(t, Tensor::from_primitive::<Cube>)
    }

    /// An integer kernel output as a fused tensor.
    fn int(&self, t: CubeTensor) -> Tensor<1, Int> {
        self.enter(t, Tensor::<1, Int>::from_primitive::<Cube>)
    }
}

/// The values of a host tensor.
fn host_values<const D: usize>(t: &Tensor<D>) -> Vec<f32> {
    t.to_data().try_into_vec_as::<f32>().expect("f32 data")
}

/// The standard deviation of a noise draw: one for every coordinate, or one per coordinate (a
/// tensor on the gradient's device, as the optimized mechanism's solver leaves it).
#[derive(Debug, Clone)]
pub enum NoiseScale {
    /// The same sigma everywhere.
    Uniform(f32),
    /// One sigma per coordinate, flattened row-major (boxed: a tensor handle is large).
    PerCoordinate(Box<Tensor<1>>),
}

/// `(grad + sigma * z) * scale`, z standard normals read from `position` (element i from block
/// `position.block + i / 8`). The draw reads [`gaussian::blocks_for`]`(n)` blocks.
pub fn noisy_scale<const D: usize>(
    grad: Tensor<D>,
    sigma: &NoiseScale,
    position: &StreamPosition,
    scale: f32,
) -> Result<Tensor<D>, String> {
    let n = grad.shape().num_elements();
    if let NoiseScale::PerCoordinate(s) = sigma
        && s.dims()[0] != n
    {
        return Err(format!("{} noise scales for {n} coordinates", s.dims()[0]));
    }
    let device = grad.device();
    let sigma = match sigma {
        NoiseScale::Uniform(s) => Tensor::<1>::from_data(TensorData::new(vec![*s], [1]), &device),
        NoiseScale::PerCoordinate(s) => (**s).clone(),
    };
    match place(grad)? {
        #[cfg(feature = "wgpu")]
        Placement::Cube(on) => {
            let OnCube { tensor, stream } = on;
            let s = sigma.try_into_primitive::<Cube>().map_err(|_| "sigma is not on the gradient's device")?;
            Ok(stream.float(cube_noise::noisy_scale(tensor, stream.resolve(s), position, scale)))
        }
        Placement::Host(g) => {
            let shape = g.shape();
            let sigma = host_values(&sigma);
            let x = host_values(&g);
            let values = gaussian::map_normals(position, n, |i, z| {
                (x[i] + sigma[if sigma.len() == 1 { 0 } else { i }] * z) * scale
            });
            Ok(Tensor::from_data(TensorData::new(values, shape), &device))
        }
    }
}

/// The patches of `x` [B, C, H, W] for a convolution of geometry `p`, [B, C*kh*kw, H'*W'] (see
/// [`crate::im2col`](mod@crate::im2col)), on x's device. x must not be an autodiff tensor (take its
/// `inner()`).
pub fn im2col(x: Tensor<4>, p: &Patches) -> Result<Tensor<3>, String> {
    let [b, c, h, w] = x.dims();
    let device = x.device();
    match place(x)? {
        #[cfg(feature = "wgpu")]
        Placement::Cube(on) => Ok(on.stream.float(cube_im2col::im2col(on.tensor, p))),
        Placement::Host(t) => {
            let [ho, wo] = p.output_size([h, w]);
            let [kh, kw] = p.kernel;
            let cols = crate::im2col::im2col(&host_values(&t), [b, c, h, w], p);
            Ok(Tensor::from_data(TensorData::new(cols, [b, c * kh * kw, ho * wo]), &device))
        }
    }
}

/// The first `n` random words of `position`, computed on `device` (for cross-backend checks).
pub fn random_words(device: &Device, position: &StreamPosition, n: usize) -> Result<Vec<u32>, String> {
    match place(Tensor::<1>::zeros([1], device))? {
        #[cfg(feature = "wgpu")]
        Placement::Cube(on) => {
            let words = on.stream.int(cube_noise::words(&on.tensor, position, n));
            words.to_data().try_into_vec::<u32>().map_err(|e| format!("{e:?}"))
        }
        Placement::Host(_) => Ok(chacha::words(position, n)),
    }
}

/// A_s^{-1} applied to `v` flattened row-major (one smoothing over all its elements).
pub fn smooth<const D: usize>(v: Tensor<D>, smoothing: &LaplacianSmoothing) -> Result<Tensor<D>, String> {
    let n = v.shape().num_elements();
    if n == 0 || smoothing.sigma() == 0.0 {
        return Ok(v);
    }
    let device = v.device();
    match place(v)? {
        #[cfg(feature = "wgpu")]
        Placement::Cube(on) => Ok(on.stream.float(cube_smoothing::circulant(on.tensor, &smoothing.taps(n)))),
        Placement::Host(t) => {
            let shape = t.shape();
            Ok(Tensor::from_data(TensorData::new(smoothing.apply_fft(&host_values(&t)), shape), &device))
        }
    }
}

/// The sigma of Xiang et al.'s solver (Eq. 11) for non-negative `weights` `[d]` under one sphere of
/// radius `alpha` (L2 clipping) and condition `tau`: the fused kernel on a CubeCL device, the f64
/// reference (`sigma_solver::solve`) on the host. Either way alpha / min sigma = sqrt(tau) exactly
/// up to rounding. The device path reads one counter back to prove every iteration ran.
pub fn sphere_sigma(weights: Tensor<1>, alpha: f64, tau: f64, schedule: &SolverSchedule) -> Result<Tensor<1>, String> {
    let d = weights.dims()[0];
    if d == 0 {
        return Err("the solver needs at least one coordinate".into());
    }
    if !(alpha.is_finite() && alpha > 0.0 && tau.is_finite() && tau > 0.0) {
        return Err(format!("alpha = {alpha} and tau = {tau} must be positive and finite"));
    }
    let device = weights.device();
    match place(weights)? {
        #[cfg(feature = "wgpu")]
        Placement::Cube(on) => {
            let OnCube { tensor, stream } = on;
            let (sigma, done) = cube_solver::sphere_sigma(tensor, alpha as f32, tau as f32, schedule);
            let done = stream.int(done).to_data().try_into_vec::<u32>();
            let want = schedule.iterations as u32 + 1;
            match done {
                Ok(d) if d == [want] => Ok(stream.float(sigma)),
                _ => Err(format!(
                    "the device cut the sigma solver short ({done:?} of {want} passes ran to their end); \
                     lavapipe caps a shader's loop iterations: use the cpu device for a model this large"
                )),
            }
        }
        Placement::Host(w) => {
            let w: Vec<f64> = host_values(&w).into_iter().map(f64::from).collect();
            let sigma = sigma_solver::solve(&w, &[Block { start: 0, len: d, radius: alpha }], tau, schedule)?;
            let sigma: Vec<f32> = sigma.into_iter().map(|s| s as f32).collect();
            Ok(Tensor::from_data(TensorData::new(sigma, [d]), &device))
        }
    }
}
