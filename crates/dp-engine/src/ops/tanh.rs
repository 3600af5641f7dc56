//! The hyperbolic tangent as a Burn backend extension. Flex computes `tanh` one element at a time
//! through libm (expm1f), which kept the CPU's vector units idle: on WRN-16-4 with tanh it was a
//! third of a step. Here the flex forward is a branch-free approximation that the compiler
//! vectorises (Cephes' odd polynomial below 0.625, 1 - 2 / (e^2|x| + 1) above, with e^y from a
//! polynomial and an exponent shift; within 4e-7 relative of the true value, NaN and infinities
//! included), and the backward, g (1 - y^2) from the output y, one fused pass. The other backends
//! keep Burn's own tanh and compute the backward in Burn's operations.

// The extension names Burn's deprecated ndarray backend, the oracle tests' reference, and the
// code it generates for it cannot carry an attribute of its own.
#![allow(deprecated)]

use crate::host::flex::contiguous_f32;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Flex, backend_extension};
use burn::tensor::{Scalar, Tensor, TensorData};
use dp_kernels::vectorised::vectorised;
use rayon::prelude::*;

/// tanh of every element.
pub fn tanh<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    Tensor::from_dispatch(<burn::backend::Dispatch as TanhBackend>::dp_tanh(x.into_dispatch()))
}

/// tanh as a backend extension.
#[allow(deprecated)] // NdArray: the oracle tests' reference backend (the `ndarray` feature).
#[backend_extension(Flex, NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"), Autodiff)]
pub trait TanhBackend: Backend {
    /// tanh of every element of x.
    fn dp_tanh(x: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::float_tanh(x)
    }
}

/// The backward of tanh from its output, per backend.
pub trait TanhBackward: Backend {
    /// dL/dx = g (1 - y^2) for the output y and its gradient g.
    fn tanh_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        composed_backward::<Self>(y, grad)
    }
}

/// The backward in Burn's operations.
fn composed_backward<B: Backend>(y: FloatTensor<B>, grad: FloatTensor<B>) -> FloatTensor<B> {
    let slope = B::float_add_scalar(B::float_neg(B::float_mul(y.clone(), y)), Scalar::Float(1.0));
    B::float_mul(grad, slope)
}

#[cfg(feature = "ndarray")]
impl TanhBackend for burn::backend::NdArray {}
#[cfg(feature = "ndarray")]
impl TanhBackward for burn::backend::NdArray {}
#[cfg(feature = "wgpu")]
impl TanhBackend for burn_cubecl::Cube {}
#[cfg(feature = "wgpu")]
impl TanhBackward for burn_cubecl::Cube {}

/// e^y for y in [0, 20] (Cephes' expf: y = n ln 2 + r, |r| <= ln 2 / 2, a degree-6 polynomial in
/// r, 2^n by the exponent bits), branch-free.
#[inline(always)]
fn exp_small(y: f32) -> f32 {
    // Rounds to the nearest integer without a libm call (valid far beyond 18 / ln 2).
    const ROUND: f32 = 12_582_912.0;
    let n = (y * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = y - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let p =
        ((((1.987_569_1e-4 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 1.666_666_5e-1) * r + 5e-1;
    let e = p * r * r + r + 1.0;
    e * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// tanh(x) within 4e-7 relative, branch-free (selects only), NaN-propagating.
#[inline(always)]
fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    // tanh(10) rounds to 1 in f32 (tanh(9) does not); NaN stays NaN (the comparison is false).
    let c = if a > 10.0 { 10.0 } else { a };
    let s = c * c;
    let small =
        ((((-5.704_988_7e-3 * s + 2.063_909e-2) * s - 5.373_971_6e-2) * s + 1.333_144_2e-1) * s - 3.333_328e-1) * s * c
            + c;
    let large = 1.0 - 2.0 / (exp_small(2.0 * c) + 1.0);
    let t = if c < 0.625 { small } else { large };
    t.copysign(x)
}

/// Elements of a contiguous f32 flex tensor per parallel task.
const CHUNK: usize = 1 << 14;

impl TanhBackend for Flex {
    fn dp_tanh(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let Some(x) = contiguous_f32(&x) else {
            return Self::float_tanh(x);
        };
        let input = x.storage::<f32>();
        let mut out = vec![0.0f32; input.len()];
        out.par_chunks_mut(CHUNK).zip(input.par_chunks(CHUNK)).for_each(|(out, input)| {
            vectorised(|| {
                for (o, &v) in out.iter_mut().zip(input) {
                    *o = tanh_f32(v);
                }
            })
        });
        FlexTensor::from_data(TensorData::new(out, x.layout().shape().clone()))
    }
}

impl TanhBackward for Flex {
    fn tanh_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let (Some(y), Some(grad)) = (contiguous_f32(&y), contiguous_f32(&grad)) else {
            return composed_backward::<Self>(y, grad);
        };
        let (values, grads) = (y.storage::<f32>(), grad.storage::<f32>());
        let mut out = vec![0.0f32; values.len()];
        out.par_chunks_mut(CHUNK).zip(values.par_chunks(CHUNK).zip(grads.par_chunks(CHUNK))).for_each(
            |(out, (values, grads))| {
                vectorised(|| {
                    for ((o, &y), &g) in out.iter_mut().zip(values).zip(grads) {
                        *o = g * (1.0 - y * y);
                    }
                })
            },
        );
        FlexTensor::from_data(TensorData::new(out, y.layout().shape().clone()))
    }
}

/// The autodiff step of tanh: its backward needs only the output.
#[derive(Debug)]
struct DpTanh;

impl<B: Backend + TanhBackward> Backward<B, 1> for DpTanh {
    type State = FloatTensor<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        if let Some(node) = parent {
            grads.register::<B>(node.id, B::tanh_backward(ops.state, grad));
        }
    }
}

impl<B: Backend + TanhBackend + TanhBackward, C: CheckpointStrategy> TanhBackend for Autodiff<B, C> {
    fn dp_tanh(x: FloatTensor<Self>) -> FloatTensor<Self> {
        match DpTanh.prepare::<C>([x.node()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let y = B::dp_tanh(x.into_primitive());
                prep.finish(y.clone(), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::dp_tanh(x.into_primitive())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_io::to_host;
    use burn::tensor::Device;

    #[test]
    fn the_approximation_is_within_4e_7_of_tanh() {
        let mut worst = 0.0f64;
        // Every 1/4096 over [-20, 20], both branches and their boundary at 0.625 included.
        for i in -81_920..=81_920 {
            let x = i as f32 / 4096.0;
            let (got, want) = (tanh_f32(x) as f64, (x as f64).tanh());
            let error = (got - want).abs() / want.abs().max(f64::MIN_POSITIVE);
            worst = worst.max(if want == 0.0 { got.abs() } else { error });
        }
        assert!(worst <= 4e-7, "worst relative error {worst}");
        for x in [1e-30f32, -1e-30, 1e-40, 0.624_999_9, 0.625, 9.0, 9.5, 10.0, 1e10] {
            let want = (x as f64).tanh();
            assert!((tanh_f32(x) as f64 - want).abs() <= 4e-7 * want.abs(), "tanh({x}) = {}", tanh_f32(x));
        }
        assert_eq!(tanh_f32(f32::INFINITY), 1.0);
        assert_eq!(tanh_f32(f32::NEG_INFINITY), -1.0);
        assert!(tanh_f32(f32::NAN).is_nan());
        assert!(tanh_f32(-0.0).is_sign_negative() && tanh_f32(-0.0) == 0.0);
    }

    #[test]
    fn the_extension_equals_burns_tanh_forward_and_backward() {
        let mut devices = vec![Device::flex(), Device::ndarray()];
        devices.extend(dp_kernels::wgpu_probe::wgpu_for_tests());
        let shape = [3, 5, 7, 11];
        let n: usize = shape.iter().product();
        let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1001) as f32 / 100.0 - 5.0).collect();
        let run = |f: &dyn Fn(Tensor<4>) -> Tensor<4>, device: &Device| {
            let device = device.clone().autodiff();
            let x = Tensor::<4>::from_data(TensorData::new(x.clone(), shape), &device).require_grad();
            let y = f(x.clone());
            let weights = (0..n).map(|i| (i % 5) as f32 - 2.0).collect::<Vec<_>>();
            let grads = (y.clone() * Tensor::<4>::from_data(TensorData::new(weights, shape), &device)).sum().backward();
            (to_host(&y.inner()), to_host(&x.grad(&grads).expect("a gradient")))
        };
        let want = run(&burn::tensor::activation::tanh, &Device::ndarray());
        for device in &devices {
            let got = run(&tanh, device);
            for (what, got, want) in [("y", &got.0, &want.0), ("dx", &got.1, &want.1)] {
                for (i, (g, w)) in got.iter().zip(want).enumerate() {
                    assert!((g - w).abs() <= 1e-6 * (1.0 + w.abs()), "{what}[{i}] on {device:?}: {g} against {w}");
                }
            }
        }
    }
}
