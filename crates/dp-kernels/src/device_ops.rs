//! The kernels on Burn tensors: a tensor on a CubeCL device (wgpu) runs the device kernel; a tensor
//! on the ndarray CPU backend runs the CPU reference on the same random words, so both backends
//! draw the same noise for the same key. Autodiff tensors are refused: noise and smoothing act on
//! released gradients, never inside a graph.

use crate::chacha::{self, StreamPosition};
use crate::gaussian;
use crate::smoothing::LaplacianSmoothing;
use crate::{cube_noise, cube_smoothing};
#[allow(deprecated)]
use burn::backend::NdArray;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_cubecl::CubeBackend;

/// Where a tensor lives, as far as the kernels care.
enum Placement<const D: usize> {
    /// On a CubeCL device.
    Cube(burn_cubecl::tensor::CubeTensor),
    /// On the ndarray CPU backend.
    Host(Tensor<D>),
}

/// Finds the backend of `t`, or says why the kernels cannot take it.
#[allow(deprecated)]
fn place<const D: usize>(t: Tensor<D>) -> Result<Placement<D>, String> {
    if let Ok(cube) = t.clone().try_into_primitive::<CubeBackend>() {
        return Ok(Placement::Cube(cube));
    }
    if t.clone().try_into_primitive::<NdArray>().is_ok() {
        return Ok(Placement::Host(t));
    }
    Err("the DP kernels take tensors on wgpu or ndarray, outside autodiff".into())
}

/// The values of a host tensor.
fn host_values<const D: usize>(t: &Tensor<D>) -> Vec<f32> {
    t.to_data().try_into_vec_as::<f32>().expect("f32 data")
}

/// `(grad + sigma * z) * scale`, z standard normals read from `position` (element i from block
/// `position.block + i / 8`); `sigma` has one entry (the same for all) or one per element.
/// The draw reads [`gaussian::blocks_for`]`(n)` blocks.
pub fn noisy_scale<const D: usize>(
    grad: Tensor<D>,
    sigma: &[f32],
    position: &StreamPosition,
    scale: f32,
) -> Result<Tensor<D>, String> {
    let n = grad.shape().num_elements();
    if sigma.len() != 1 && sigma.len() != n {
        return Err(format!("{} noise scales for {n} coordinates", sigma.len()));
    }
    let device = grad.device();
    match place(grad)? {
        Placement::Cube(g) => {
            let s = Tensor::<1>::from_data(TensorData::new(sigma.to_vec(), [sigma.len()]), &device);
            let s = s.try_into_primitive::<CubeBackend>().map_err(|e| format!("{e:?}"))?;
            Ok(Tensor::from_primitive::<CubeBackend>(cube_noise::noisy_scale(g, s, position, scale)))
        }
        Placement::Host(g) => {
            let shape = g.shape();
            let z = gaussian::normals(position, n);
            let values = host_values(&g)
                .iter()
                .zip(&z)
                .enumerate()
                .map(|(i, (&x, &z))| (x + sigma[if sigma.len() == 1 { 0 } else { i }] * z) * scale)
                .collect::<Vec<f32>>();
            Ok(Tensor::from_data(TensorData::new(values, shape), &device))
        }
    }
}

/// The first `n` random words of `position`, computed on `device` (for cross-backend checks).
pub fn random_words(device: &Device, position: &StreamPosition, n: usize) -> Result<Vec<u32>, String> {
    match place(Tensor::<1>::zeros([1], device))? {
        Placement::Cube(like) => {
            let words = Tensor::<1, Int>::from_primitive::<CubeBackend>(cube_noise::words(&like, position, n));
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
        Placement::Cube(t) => {
            Ok(Tensor::from_primitive::<CubeBackend>(cube_smoothing::circulant(t, &smoothing.taps(n))))
        }
        Placement::Host(t) => {
            let shape = t.shape();
            Ok(Tensor::from_data(TensorData::new(smoothing.apply_fft(&host_values(&t)), shape), &device))
        }
    }
}
