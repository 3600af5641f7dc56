//! The parameter-free step of GroupNorm and LayerNorm: xhat = (x - mean) / sqrt(var + eps) along
//! the last axis of x [R, S, M] (GroupNorm: [B, groups, C / groups * positions]; LayerNorm:
//! [B, positions, D]), with the biased variance. Written in Burn's operations it is about ten
//! passes over the activations forward and, through autodiff of each operation, about fifteen
//! backward; WRN-16-4 has thirteen of them. As a Burn backend extension with its own autodiff step
//! it is one parallel pass per row each way on flex (its backward, dx = (g - mean(g) -
//! xhat mean(g xhat)) / sqrt(var + eps), needs only xhat and the row's scale), and a handful of
//! Burn operations on the other backends.

// The extension names Burn's deprecated ndarray backend, the oracle tests' reference, and the
// code it generates for it cannot carry an attribute of its own.
#![allow(deprecated)]

use crate::host::buffers::zeros;
use crate::host::flex::{contiguous_f32, dims};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Flex, backend_extension};
use burn::tensor::{Scalar, Tensor, TensorData};
use rayon::prelude::*;

/// Normalises each row of x [R, S, M] along M to mean 0 and variance 1 (up to `epsilon`).
pub fn normalize_rows(x: Tensor<3>, epsilon: f64) -> Tensor<3> {
    Tensor::from_dispatch(<burn::backend::Dispatch as NormalizeBackend>::dp_normalize(x.into_dispatch(), epsilon))
}

/// The normalisation as a backend extension.
#[allow(deprecated)] // NdArray: the oracle tests' reference backend (the `ndarray` feature).
#[backend_extension(Flex, NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"), Autodiff)]
pub trait NormalizeBackend: Backend {
    /// xhat of x [R, S, M] along M.
    fn dp_normalize(x: FloatTensor<Self>, epsilon: f64) -> FloatTensor<Self> {
        composed::<Self>(x, epsilon).0
    }
}

/// The forward pass with the row scales its backward needs, and the backward, per backend.
pub trait NormalizeParts: Backend {
    /// (xhat [R, S, M], 1 / sqrt(var + eps) [R, S, 1]).
    fn normalize_forward(x: FloatTensor<Self>, epsilon: f64) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::<Self>(x, epsilon)
    }

    /// dL/dx from dL/dxhat `grad`, xhat and the row scales.
    fn normalize_backward(
        xhat: FloatTensor<Self>,
        scale: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed_backward::<Self>(xhat, scale, grad)
    }
}

/// The normalisation in Burn's operations: (xhat, row scales).
fn composed<B: Backend>(x: FloatTensor<B>, epsilon: f64) -> (FloatTensor<B>, FloatTensor<B>) {
    let centered = B::float_sub(x.clone(), B::float_mean_dim(x, 2));
    let variance = B::float_mean_dim(B::float_mul(centered.clone(), centered.clone()), 2);
    let scale = B::float_recip(B::float_sqrt(B::float_add_scalar(variance, Scalar::Float(epsilon))));
    (B::float_mul(centered, scale.clone()), scale)
}

/// The backward in Burn's operations: (g - mean(g) - xhat mean(g xhat)) * scale.
fn composed_backward<B: Backend>(xhat: FloatTensor<B>, scale: FloatTensor<B>, grad: FloatTensor<B>) -> FloatTensor<B> {
    let along = B::float_mean_dim(B::float_mul(grad.clone(), xhat.clone()), 2);
    let centered = B::float_sub(grad.clone(), B::float_mean_dim(grad, 2));
    B::float_mul(B::float_sub(centered, B::float_mul(xhat, along)), scale)
}

#[cfg(feature = "ndarray")]
impl NormalizeBackend for burn::backend::NdArray {}
#[cfg(feature = "ndarray")]
impl NormalizeParts for burn::backend::NdArray {}
#[cfg(feature = "wgpu")]
impl NormalizeBackend for burn_cubecl::Cube {}
#[cfg(feature = "wgpu")]
impl NormalizeParts for burn_cubecl::Cube {}

/// Lanes of the row sums: independent accumulators the compiler keeps in SIMD registers.
const LANES: usize = 16;

/// sum f(a_i, b_i) over two equal rows, in f32 lanes summed in f64.
fn row_sum(a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) -> f64 {
    let mut acc = [0.0f32; LANES];
    let (chunks_a, chunks_b) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f64 = chunks_a.remainder().iter().zip(chunks_b.remainder()).map(|(&x, &y)| f(x, y) as f64).sum();
    for (ca, cb) in chunks_a.zip(chunks_b) {
        for i in 0..LANES {
            acc[i] += f(ca[i], cb[i]);
        }
    }
    acc.iter().map(|&v| v as f64).sum::<f64>() + tail
}

/// The rows of a 3-D f32 flex tensor, contiguous, with their length; None for any other tensor.
fn flex_rows(x: &FloatTensor<Flex>) -> Option<(FlexTensor, [usize; 3])> {
    let shape = dims::<3>(x).filter(|s| s[2] > 0)?;
    Some((contiguous_f32(x)?, shape))
}

impl NormalizeBackend for Flex {
    fn dp_normalize(x: FloatTensor<Self>, epsilon: f64) -> FloatTensor<Self> {
        Self::normalize_forward(x, epsilon).0
    }
}

impl NormalizeParts for Flex {
    fn normalize_forward(x: FloatTensor<Self>, epsilon: f64) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let Some((x, dims)) = flex_rows(&x) else {
            return composed::<Self>(x, epsilon);
        };
        let m = dims[2];
        let input = x.storage::<f32>();
        let mut out: Vec<f32> = zeros(input.len());
        let mut scales = vec![0.0f32; input.len() / m];
        out.par_chunks_mut(m).zip(scales.par_iter_mut()).zip(input.par_chunks(m)).for_each(|((out, scale), row)| {
            let mean = (row_sum(row, row, |v, _| v) / m as f64) as f32;
            let variance = row_sum(row, row, |v, _| (v - mean) * (v - mean)) / m as f64;
            *scale = (1.0 / (variance + epsilon).sqrt()) as f32;
            for (o, &v) in out.iter_mut().zip(row) {
                *o = (v - mean) * *scale;
            }
        });
        let rows = [dims[0], dims[1], 1];
        (FlexTensor::from_data(TensorData::new(out, dims)), FlexTensor::from_data(TensorData::new(scales, rows)))
    }

    fn normalize_backward(
        xhat: FloatTensor<Self>,
        scale: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let (Some((xhat, dims)), Some((grad, _)), Some((scale, _))) =
            (flex_rows(&xhat), flex_rows(&grad), flex_rows(&scale))
        else {
            return composed_backward::<Self>(xhat, scale, grad);
        };
        let m = dims[2];
        let (xhat, grad, scales) = (xhat.storage::<f32>(), grad.storage::<f32>(), scale.storage::<f32>());
        let mut out: Vec<f32> = zeros(xhat.len());
        out.par_chunks_mut(m).zip(xhat.par_chunks(m).zip(grad.par_chunks(m))).zip(scales.par_iter()).for_each(
            |((out, (xhat, grad)), &scale)| {
                let mean = (row_sum(grad, grad, |g, _| g) / m as f64) as f32;
                let along = (row_sum(grad, xhat, |g, x| g * x) / m as f64) as f32;
                for ((o, &g), &x) in out.iter_mut().zip(grad).zip(xhat) {
                    *o = (g - mean - x * along) * scale;
                }
            },
        );
        FlexTensor::from_data(TensorData::new(out, dims))
    }
}

/// The autodiff step of the normalisation.
#[derive(Debug)]
struct DpNormalize;

impl<B: Backend + NormalizeParts> Backward<B, 1> for DpNormalize {
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (xhat, scale) = ops.state;
        if let Some(node) = parent {
            grads.register::<B>(node.id, B::normalize_backward(xhat, scale, grad));
        }
    }
}

impl<B: Backend + NormalizeBackend + NormalizeParts, C: CheckpointStrategy> NormalizeBackend for Autodiff<B, C> {
    fn dp_normalize(x: FloatTensor<Self>, epsilon: f64) -> FloatTensor<Self> {
        match DpNormalize.prepare::<C>([x.node()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (xhat, scale) = B::normalize_forward(x.into_primitive(), epsilon);
                prep.finish((xhat.clone(), scale), xhat)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::dp_normalize(x.into_primitive(), epsilon)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_io::to_host;
    use burn::tensor::Device;

    /// Values and input gradients of `normalize` on `x` (on `device`), the loss weighting output i
    /// by a fixed pseudo-random weight.
    fn normalized(
        normalize: &dyn Fn(Tensor<3>) -> Tensor<3>,
        x: &[f32],
        shape: [usize; 3],
        device: &Device,
    ) -> (Vec<f32>, Vec<f32>) {
        let device = device.clone().autodiff();
        let x = Tensor::<3>::from_data(TensorData::new(x.to_vec(), shape), &device).require_grad();
        let y = normalize(x.clone());
        let weights = (0..x.shape().num_elements()).map(|i| ((i * 37 % 11) as f32 - 5.0) / 3.0).collect::<Vec<_>>();
        let weights = Tensor::<3>::from_data(TensorData::new(weights, shape), &device);
        let grads = (y.clone() * weights).sum().backward();
        (to_host(&y.inner()), to_host(&x.grad(&grads).expect("a gradient")))
    }

    /// The normalisation as the layers wrote it before: Burn's operations and their autodiff.
    fn burns(x: Tensor<3>, epsilon: f64) -> Tensor<3> {
        let centered = x.clone() - x.mean_dim(2);
        let variance = centered.clone().square().mean_dim(2);
        centered / variance.add_scalar(epsilon).sqrt()
    }

    fn close(got: &[f32], want: &[f32], what: &str) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "{what}[{i}]: {g} against {w}");
        }
    }

    #[test]
    fn the_fused_normalisation_equals_burns_operations_forward_and_backward() {
        let mut devices = vec![Device::flex(), Device::ndarray()];
        devices.extend(dp_kernels::wgpu_probe::wgpu_for_tests());
        // Rows shorter than, equal to and longer than the lanes, with a remainder; a row of one
        // (xhat and its gradient are 0); an offset and a spread that stress the variance.
        for (shape, offset, spread) in [
            ([2, 3, 37], 0.0, 1.0),
            ([3, 2, 16], 5.0, 0.1),
            ([1, 4, 5], -2.0, 3.0),
            ([2, 1, 1], 1.0, 1.0),
            ([2, 2, 300], 10.0, 0.5),
        ] {
            let n: usize = shape.iter().product();
            let x: Vec<f32> = (0..n).map(|i| offset + spread * (((i * 7919) % 101) as f32 / 50.0 - 1.0)).collect();
            let want = normalized(&|t| burns(t, 1e-5), &x, shape, &Device::ndarray());
            for device in &devices {
                let got = normalized(&|t| normalize_rows(t, 1e-5), &x, shape, device);
                close(&got.0, &want.0, &format!("xhat {shape:?} on {device:?}"));
                close(&got.1, &want.1, &format!("dx {shape:?} on {device:?}"));
            }
        }
    }
}
