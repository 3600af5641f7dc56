//! The per-channel scale and shift after a normalisation, y = gamma_c xhat + beta_c on xhat
//! [R, C, P] (GroupNorm: [B, C, pixels]), as a Burn backend extension. Written in Burn's
//! operations it is a broadcast multiply and add forward and, backward, a multiply and two
//! reductions over the examples and positions, each of which flex runs on one thread: on
//! WRN-16-4's thirteen GroupNorms they kept a core idle. Here the flex forward is one parallel
//! pass, and the backward one parallel pass for dxhat = gamma_c g, written into the gradient's
//! own values, and, where gamma and beta are trained through autodiff (the plain step; the DP
//! step's tape takes their per-example gradients instead), one for the sums per row and channel
//! (`host::channel_sums`, which those per-example gradients also are).
//! The other backends keep Burn's operations.

// The extension names Burn's deprecated ndarray backend, the oracle tests' reference, and the
// code it generates for it cannot carry an attribute of its own.
#![allow(deprecated)]

use crate::host::channel_sums::channel_sums;
use crate::host::flex::{contiguous_f32, dims, map_chunks};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Flex, TensorMetadata, backend_extension};
use burn::tensor::{Shape, Tensor, TensorData};
use dp_kernels::vectorised::vectorised;

/// gamma_c xhat + beta_c for xhat `[R, C, P]`, gamma and beta `[C]`.
pub fn scale_shift(xhat: Tensor<3>, gamma: Tensor<1>, beta: Tensor<1>) -> Tensor<3> {
    Tensor::from_dispatch(<burn::backend::Dispatch as ScaleShiftBackend>::dp_scale_shift(
        xhat.into_dispatch(),
        gamma.into_dispatch(),
        beta.into_dispatch(),
    ))
}

/// The scale and shift as a backend extension.
#[allow(deprecated)] // NdArray: the oracle tests' reference backend (the `ndarray` feature).
#[backend_extension(Flex, NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"), Autodiff)]
pub trait ScaleShiftBackend: Backend {
    /// gamma_c xhat + beta_c.
    fn dp_scale_shift(xhat: FloatTensor<Self>, gamma: FloatTensor<Self>, beta: FloatTensor<Self>) -> FloatTensor<Self> {
        composed::<Self>(xhat, gamma, beta)
    }
}

/// The backward per backend: dL/dxhat and, where `params` (gamma or beta is trained through
/// autodiff: not in the DP step, whose tape takes their per-example gradients instead), (dL/dgamma,
/// dL/dbeta), from dL/dy `grad`, xhat and gamma.
pub trait ScaleShiftBackward: Backend {
    /// dxhat = gamma_c g `[R, C, P]`; dgamma = sum over r and p of g xhat, dbeta of g, `[C]` each.
    fn scale_shift_backward(
        xhat: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        params: bool,
    ) -> (FloatTensor<Self>, Option<[FloatTensor<Self>; 2]>) {
        composed_backward::<Self>(xhat, gamma, grad, params)
    }
}

/// [C] as [1, C, 1], to broadcast over xhat [R, C, P].
fn per_channel<B: Backend>(t: FloatTensor<B>) -> FloatTensor<B> {
    let c = t.shape()[0];
    B::float_reshape(t, Shape::new([1, c, 1]))
}

/// The forward in Burn's operations.
fn composed<B: Backend>(xhat: FloatTensor<B>, gamma: FloatTensor<B>, beta: FloatTensor<B>) -> FloatTensor<B> {
    B::float_add(B::float_mul(xhat, per_channel::<B>(gamma)), per_channel::<B>(beta))
}

/// [1, C, 1] sums over rows and positions, as [C].
fn channel_total<B: Backend>(t: FloatTensor<B>) -> FloatTensor<B> {
    let c = t.shape()[1];
    B::float_reshape(B::float_sum_dim(B::float_sum_dim(t, 2), 0), Shape::new([c]))
}

/// The backward in Burn's operations.
fn composed_backward<B: Backend>(
    xhat: FloatTensor<B>,
    gamma: FloatTensor<B>,
    grad: FloatTensor<B>,
    params: bool,
) -> (FloatTensor<B>, Option<[FloatTensor<B>; 2]>) {
    let sums = params.then(|| [channel_total::<B>(B::float_mul(grad.clone(), xhat)), channel_total::<B>(grad.clone())]);
    (B::float_mul(grad, per_channel::<B>(gamma)), sums)
}

#[cfg(feature = "ndarray")]
impl ScaleShiftBackend for burn::backend::NdArray {}
#[cfg(feature = "ndarray")]
impl ScaleShiftBackward for burn::backend::NdArray {}
#[cfg(feature = "wgpu")]
impl ScaleShiftBackend for burn_cubecl::Cube {}
#[cfg(feature = "wgpu")]
impl ScaleShiftBackward for burn_cubecl::Cube {}

/// xhat [R, C, P] and one [C] tensor per channel, as flex host values with xhat's dimensions;
/// None where a tensor is not f32, or the shapes disagree.
fn flex_parts(xhat: &FlexTensor, channel: &FlexTensor) -> Option<(FlexTensor, FlexTensor, [usize; 3])> {
    let (xhat, channel) = (contiguous_f32(xhat)?, contiguous_f32(channel)?);
    let shape = dims::<3>(&xhat)?;
    (dims::<1>(&channel)? == [shape[1]] && shape[2] > 0).then_some((xhat, channel, shape))
}

/// a gamma_c (+ beta_c) for a [R, C, P] (P-long runs, channel after channel), in place where a
/// alone holds its values.
fn per_channel_pass(a: FlexTensor, gamma: &[f32], beta: Option<&[f32]>, p: usize) -> Result<FlexTensor, FlexTensor> {
    let c = gamma.len();
    map_chunks(a, |offset, values| {
        let mut at = 0;
        while at < values.len() {
            let position = offset + at;
            let run = (p - position % p).min(values.len() - at);
            let channel = position / p % c;
            let (scale, shift) = (gamma[channel], beta.map_or(0.0, |b| b[channel]));
            vectorised(|| {
                for v in &mut values[at..at + run] {
                    *v = *v * scale + shift;
                }
            });
            at += run;
        }
    })
}

impl ScaleShiftBackend for Flex {
    fn dp_scale_shift(xhat: FloatTensor<Self>, gamma: FloatTensor<Self>, beta: FloatTensor<Self>) -> FloatTensor<Self> {
        let (Some((x, scale, shape)), Some(shift)) = (flex_parts(&xhat, &gamma), contiguous_f32(&beta)) else {
            return composed::<Self>(xhat, gamma, beta);
        };
        drop(xhat);
        per_channel_pass(x, scale.storage::<f32>(), Some(shift.storage::<f32>()), shape[2])
            .unwrap_or_else(|x| composed::<Self>(x, gamma, beta))
    }
}

impl ScaleShiftBackward for Flex {
    fn scale_shift_backward(
        xhat: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        params: bool,
    ) -> (FloatTensor<Self>, Option<[FloatTensor<Self>; 2]>) {
        let parts = flex_parts(&xhat, &gamma).zip(contiguous_f32(&grad));
        let Some(((x, scale, shape), g)) = parts.filter(|((_, _, shape), g)| dims(g) == Some(*shape)) else {
            return composed_backward::<Self>(xhat, gamma, grad, params);
        };
        // g alone holds the gradient's values now, where grad did: dxhat is written into them.
        drop(grad);
        let sums = params.then(|| channel_sums(x.storage::<f32>(), g.storage::<f32>(), shape));
        let c = shape[1];
        let over_rows = |sums: Vec<f32>| {
            let mut out = vec![0.0f64; c];
            for row in sums.chunks(c) {
                for (o, &v) in out.iter_mut().zip(row) {
                    *o += f64::from(v);
                }
            }
            FlexTensor::from_data(TensorData::new(out.into_iter().map(|v| v as f32).collect::<Vec<_>>(), [c]))
        };
        match per_channel_pass(g, scale.storage::<f32>(), None, shape[2]) {
            Ok(dxhat) => (dxhat, sums.map(|(along, total)| [over_rows(along), over_rows(total)])),
            Err(g) => composed_backward::<Self>(xhat, gamma, g, params),
        }
    }
}

/// The autodiff step of the scale and shift.
#[derive(Debug)]
struct DpScaleShift;

impl<B: Backend + ScaleShiftBackward> Backward<B, 3> for DpScaleShift {
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let [xhat_node, gamma_node, beta_node] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (xhat, gamma) = ops.state;
        let params = gamma_node.is_some() || beta_node.is_some();
        let (dxhat, sums) = B::scale_shift_backward(xhat, gamma, grad, params);
        if let Some(node) = xhat_node {
            grads.register::<B>(node.id, dxhat);
        }
        for (node, value) in [gamma_node, beta_node].into_iter().zip(sums.into_iter().flatten()) {
            if let Some(node) = node {
                grads.register::<B>(node.id, value);
            }
        }
    }
}

impl<B: Backend + ScaleShiftBackend + ScaleShiftBackward, C: CheckpointStrategy> ScaleShiftBackend for Autodiff<B, C> {
    fn dp_scale_shift(xhat: FloatTensor<Self>, gamma: FloatTensor<Self>, beta: FloatTensor<Self>) -> FloatTensor<Self> {
        match DpScaleShift.prepare::<C>([xhat.node(), gamma.node(), beta.node()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (xhat, gamma) = (xhat.into_primitive(), gamma.into_primitive());
                let y = B::dp_scale_shift(xhat.clone(), gamma.clone(), beta.into_primitive());
                prep.finish((xhat, gamma), y)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::dp_scale_shift(xhat.into_primitive(), gamma.into_primitive(), beta.into_primitive()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_io::to_host;
    use burn::tensor::Device;

    /// (y, dxhat, dgamma, dbeta) of `f` on xhat [R, C, P], gamma and beta (on `device`; gamma
    /// and beta `trained` through autodiff, else constants without a gradient: empty), the loss
    /// weighting each output by a fixed weight.
    #[allow(clippy::type_complexity)]
    fn run(
        f: &dyn Fn(Tensor<3>, Tensor<1>, Tensor<1>) -> Tensor<3>,
        shape: [usize; 3],
        trained: bool,
        device: &Device,
    ) -> [Vec<f32>; 4] {
        let device = device.clone().autodiff();
        let n: usize = shape.iter().product();
        let values = |count: usize, seed: usize| -> Vec<f32> {
            (0..count).map(|i| (((i + seed) * 7919) % 1001) as f32 / 250.0 - 2.0).collect()
        };
        let xhat = Tensor::<3>::from_data(TensorData::new(values(n, 0), shape), &device).require_grad();
        let param = |t: Tensor<1>| if trained { t.require_grad() } else { t };
        let gamma = param(Tensor::<1>::from_data(TensorData::new(values(shape[1], 3), [shape[1]]), &device));
        let beta = param(Tensor::<1>::from_data(TensorData::new(values(shape[1], 5), [shape[1]]), &device));
        let y = f(xhat.clone(), gamma.clone(), beta.clone());
        let weights = Tensor::<3>::from_data(TensorData::new(values(n, 11), shape), &device);
        let grads = (y.clone() * weights).sum().backward();
        let grad = |g: Option<Tensor<3>>| to_host(&g.expect("a gradient"));
        let grad1 = |g: Option<Tensor<1>>| g.map(|g| to_host(&g)).unwrap_or_default();
        [to_host(&y.inner()), grad(xhat.grad(&grads)), grad1(gamma.grad(&grads)), grad1(beta.grad(&grads))]
    }

    /// The layers' scale and shift before: Burn's broadcast operations and their autodiff.
    fn burns(xhat: Tensor<3>, gamma: Tensor<1>, beta: Tensor<1>) -> Tensor<3> {
        let c = gamma.dims()[0];
        xhat * gamma.reshape([1, c, 1]) + beta.reshape([1, c, 1])
    }

    #[test]
    fn the_extension_equals_burns_operations_forward_and_backward() {
        let mut devices = vec![Device::flex(), Device::ndarray()];
        devices.extend(dp_kernels::wgpu_probe::wgpu_for_tests());
        // Runs shorter and longer than a chunk, one channel, one position, a chunk that ends
        // inside a channel's run.
        // Gamma and beta trained (the plain step), and constants (the DP step's backward, which
        // skips their sums).
        let shapes = [[2, 3, 5], [1, 1, 7], [4, 6, 1], [3, 4, 5000], [2, 5, 16_385]];
        for (shape, trained) in shapes.into_iter().flat_map(|shape| [(shape, true), (shape, false)]) {
            let want = run(&burns, shape, trained, &Device::ndarray());
            assert_eq!(want[2].is_empty(), !trained);
            for device in &devices {
                let got = run(&scale_shift, shape, trained, device);
                for (what, got, want) in
                    ["y", "dxhat", "dgamma", "dbeta"].iter().zip(&got).zip(&want).map(|((w, g), v)| (w, g, v))
                {
                    assert_eq!(got.len(), want.len());
                    for (i, (g, w)) in got.iter().zip(want).enumerate() {
                        let close = (g - w).abs() <= 1e-4 * (1.0 + w.abs());
                        assert!(close, "{what}[{i}] {shape:?} (trained: {trained}) on {device:?}: {g} against {w}");
                    }
                }
            }
        }
    }
}
