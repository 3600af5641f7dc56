//! The activations a DP model chooses from (tanh, the "tempered sigmoid" Papernot et al. (2021)
//! found better than ReLU under DP-SGD: bounded activations keep gradient norms, and so
//! clipping, tame; and ReLU), as one Burn backend extension. Flex runs its unary and binary
//! operations on one thread, element by element: on WRN-16-4 the ReLU forward, its masked
//! backward and tanh (through libm) kept a core idle. An activation whose derivative is a
//! function of its output (tanh: 1 - y^2; ReLU: y > 0) needs only that output for its backward;
//! here the flex forward and backward are each one parallel pass that the compiler vectorises,
//! in place where the tensor alone holds its values (as flex's own operations), and the other
//! backends keep Burn's own operations. What each computes: its `ops::pointwise::Pointwise`
//! implementation (`ops::tanh`, `ops::relu`).

// The extension names Burn's deprecated ndarray backend, the oracle tests' reference, and the
// code it generates for it cannot carry an attribute of its own.
#![allow(deprecated)]

use crate::host::flex::{contiguous_f32, map_chunks};
use crate::ops::pointwise::Pointwise;
use crate::ops::{relu::Relu, tanh::Tanh};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Flex, backend_extension};
use burn::tensor::Tensor;
use dp_kernels::vectorised::vectorised;
use serde::{Deserialize, Serialize};

/// A parameter-free non-linearity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Activation {
    /// Hyperbolic tangent (tempered sigmoid).
    Tanh,
    /// Rectified linear unit.
    Relu,
}

impl Activation {
    /// Applies the activation.
    pub fn apply<const D: usize>(self, x: Tensor<D>) -> Tensor<D> {
        activate(x, self)
    }
}

/// The activation of every element of x.
pub fn activate<const D: usize>(x: Tensor<D>, f: Activation) -> Tensor<D> {
    Tensor::from_dispatch(<burn::backend::Dispatch as PointwiseBackend>::dp_activate(x.into_dispatch(), f))
}

/// The activations as a backend extension.
#[allow(deprecated)] // NdArray: the oracle tests' reference backend (the `ndarray` feature).
#[backend_extension(Flex, NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"), Autodiff)]
pub trait PointwiseBackend: Backend {
    /// f of every element of x.
    fn dp_activate(x: FloatTensor<Self>, f: Activation) -> FloatTensor<Self> {
        match f {
            Activation::Tanh => Tanh::burn_value::<Self>(x),
            Activation::Relu => Relu::burn_value::<Self>(x),
        }
    }
}

/// The backward of an activation from its output, per backend.
pub trait PointwiseBackward: Backend {
    /// dL/dx from the output y and its gradient.
    fn activation_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>, f: Activation) -> FloatTensor<Self> {
        match f {
            Activation::Tanh => Tanh::burn_backward::<Self>(y, grad),
            Activation::Relu => Relu::burn_backward::<Self>(y, grad),
        }
    }
}

#[cfg(feature = "ndarray")]
impl PointwiseBackend for burn::backend::NdArray {}
#[cfg(feature = "ndarray")]
impl PointwiseBackward for burn::backend::NdArray {}
#[cfg(feature = "wgpu")]
impl PointwiseBackend for burn_cubecl::Cube {}
#[cfg(feature = "wgpu")]
impl PointwiseBackward for burn_cubecl::Cube {}

/// F of every element of an f32 flex tensor, in place where x alone holds its values.
fn flex_value<F: Pointwise>(x: FlexTensor) -> FlexTensor {
    let pass = map_chunks(x, |_, values| {
        vectorised(|| {
            for v in values.iter_mut() {
                *v = F::value(*v);
            }
        })
    });
    pass.unwrap_or_else(F::burn_value::<Flex>)
}

/// F's backward into the gradient's own values where it alone holds them.
fn flex_backward<F: Pointwise>(y: FlexTensor, grad: FlexTensor) -> FlexTensor {
    let values = match contiguous_f32(&y) {
        Some(values) if values.layout().shape() == grad.layout().shape() => values,
        _ => return F::burn_backward::<Flex>(y, grad),
    };
    let values = values.storage::<f32>();
    let pass = map_chunks(grad, |offset, grads| {
        vectorised(|| {
            for (g, &y) in grads.iter_mut().zip(&values[offset..]) {
                *g = F::backward(y, *g);
            }
        })
    });
    pass.unwrap_or_else(|grad| F::burn_backward::<Flex>(y, grad))
}

impl PointwiseBackend for Flex {
    fn dp_activate(x: FloatTensor<Self>, f: Activation) -> FloatTensor<Self> {
        match f {
            Activation::Tanh => flex_value::<Tanh>(x),
            Activation::Relu => flex_value::<Relu>(x),
        }
    }
}

impl PointwiseBackward for Flex {
    fn activation_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>, f: Activation) -> FloatTensor<Self> {
        match f {
            Activation::Tanh => flex_backward::<Tanh>(y, grad),
            Activation::Relu => flex_backward::<Relu>(y, grad),
        }
    }
}

/// The autodiff step of an activation: its backward needs only the output.
#[derive(Debug)]
struct DpActivation(Activation);

impl<B: Backend + PointwiseBackward> Backward<B, 1> for DpActivation {
    type State = FloatTensor<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        if let Some(node) = parent {
            grads.register::<B>(node.id, B::activation_backward(ops.state, grad, self.0));
        }
    }
}

impl<B: Backend + PointwiseBackend + PointwiseBackward, C: CheckpointStrategy> PointwiseBackend for Autodiff<B, C> {
    fn dp_activate(x: FloatTensor<Self>, f: Activation) -> FloatTensor<Self> {
        match DpActivation(f).prepare::<C>([x.node()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let y = B::dp_activate(x.into_primitive(), f);
                prep.finish(y.clone(), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::dp_activate(x.into_primitive(), f)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_io::to_host;
    use burn::tensor::{Device, TensorData};

    /// Values and input gradients of `f` on x [3, 5, 7, 11] (on `device`), the loss weighting
    /// each output by a fixed weight.
    fn run(f: &dyn Fn(Tensor<4>) -> Tensor<4>, x: &[f32], device: &Device) -> (Vec<f32>, Vec<f32>) {
        let shape = [3, 5, 7, 11];
        let device = device.clone().autodiff();
        let x = Tensor::<4>::from_data(TensorData::new(x.to_vec(), shape), &device).require_grad();
        let y = f(x.clone());
        let weights = (0..x.shape().num_elements()).map(|i| (i % 5) as f32 - 2.0).collect::<Vec<_>>();
        let grads = (y.clone() * Tensor::<4>::from_data(TensorData::new(weights, shape), &device)).sum().backward();
        (to_host(&y.inner()), to_host(&x.grad(&grads).expect("a gradient")))
    }

    #[test]
    fn each_activation_equals_burns_forward_and_backward_on_every_backend() {
        let mut devices = vec![Device::flex(), Device::ndarray()];
        devices.extend(dp_kernels::wgpu_probe::wgpu_for_tests());
        // Negative, zero (both signs) and positive inputs, some exactly 0 and -0.
        let x: Vec<f32> = (0..3 * 5 * 7 * 11)
            .map(|i| match i % 97 {
                0 => 0.0,
                1 => -0.0,
                _ => ((i * 7919) % 1001) as f32 / 100.0 - 5.0,
            })
            .collect();
        let burns: [(Activation, &dyn Fn(Tensor<4>) -> Tensor<4>); 2] =
            [(Activation::Tanh, &burn::tensor::activation::tanh), (Activation::Relu, &burn::tensor::activation::relu)];
        for (f, burns) in burns {
            let want = run(burns, &x, &Device::ndarray());
            for device in &devices {
                let got = run(&|t| activate(t, f), &x, device);
                for (what, got, want) in [("y", &got.0, &want.0), ("dx", &got.1, &want.1)] {
                    for (i, (g, w)) in got.iter().zip(want).enumerate() {
                        let close = (g - w).abs() <= 1e-6 * (1.0 + w.abs());
                        assert!(close, "{f:?} {what}[{i}] on {device:?}: {g} against {w}");
                    }
                }
            }
        }
    }
}
