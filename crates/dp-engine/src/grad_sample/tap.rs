//! The tape's tap on a DP layer's output: the identity in the forward pass; in the backward pass
//! it hands its output gradient dL/dz on, and gives the same tensor as the gradient of `slot`, a
//! 1x1 leaf that requires grad, so that the tape reads dL/dz as `slot.grad(grads)` (Burn 0.22 keeps
//! the gradients of leaves only). It replaces a zero "probe" leaf of the output's shape added to
//! the output: no [B, F] zeros to allocate and add per layer (a third of a DP step's page faults
//! under glibc's default allocator). The slot also makes the output tracked where nothing before
//! it was (the first layer, on data).

// The extension names Burn's deprecated ndarray backend, the oracle tests' reference, and the
// code it generates for it cannot carry an attribute of its own.
#![allow(deprecated)]

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Flex, backend_extension};
use burn::tensor::Tensor;

/// x [B, F] unchanged; dL/dz goes to `slot`'s gradient in a backward pass (module comment).
pub fn tap(x: Tensor<2>, slot: Tensor<2>) -> Tensor<2> {
    Tensor::from_dispatch(<burn::backend::Dispatch as TapBackend>::dp_tap(x.into_dispatch(), slot.into_dispatch()))
}

/// The tap as a backend extension, so that its autodiff step can hand the gradient to the slot.
#[allow(deprecated)] // NdArray: the oracle tests' reference backend (the `ndarray` feature).
#[backend_extension(Flex, NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"), Autodiff)]
pub trait TapBackend: Backend {
    /// x, unchanged (outside autodiff the slot is not read).
    fn dp_tap(x: FloatTensor<Self>, slot: FloatTensor<Self>) -> FloatTensor<Self> {
        let _ = slot;
        x
    }
}

#[cfg(feature = "ndarray")]
impl TapBackend for burn::backend::NdArray {}
#[cfg(feature = "wgpu")]
impl TapBackend for burn_cubecl::Cube {}
impl TapBackend for Flex {}

/// The tap's autodiff step: the output gradient to x (passed on) and to the slot (kept).
#[derive(Debug)]
struct Tap;

impl<B: Backend> Backward<B, 2> for Tap {
    type State = ();

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let [node_x, node_slot] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        if let Some(node) = node_slot {
            grads.register::<B>(node.id, grad.clone());
        }
        if let Some(node) = node_x {
            grads.register::<B>(node.id, grad);
        }
    }
}

impl<B: Backend + TapBackend, C: CheckpointStrategy> TapBackend for Autodiff<B, C> {
    fn dp_tap(x: FloatTensor<Self>, slot: FloatTensor<Self>) -> FloatTensor<Self> {
        match Tap.prepare::<C>([x.node(), slot.node()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((), x.into_primitive()),
            OpsKind::UnTracked(prep) => prep.finish(x.into_primitive()),
        }
    }
}
