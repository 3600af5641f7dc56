//! Max pooling (parameter-free, so it needs no per-example treatment), without padding or
//! dilation. On Burn's flex CPU backend the forward pass with indices is one specialised pass
//! over each plane (flex's general pooling, with padding, dilation and ceil mode, takes about ten
//! times longer: 7 ms for a [256, 16, 14, 14] lot of the MNIST CNN on two cores, most of the
//! step); the backward pass and every other backend use Burn's own operations. The op is a Burn
//! backend extension with its own autodiff step, whose backward is Burn's max-pool backward
//! from the indices the forward kept.

// The extension names Burn's deprecated ndarray backend, the oracle tests' reference, and the
// code it generates for it cannot carry an attribute of its own.
#![allow(deprecated)]

use crate::host::buffers::zeros;
use crate::host::flex::{contiguous_f32, dims};
use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::ops::MaxPool2dWithIndices;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Autodiff, Backend, Flex, TensorMetadata, backend_extension, get_or_init_device_settings};
use burn::tensor::{IntDType, Tensor, TensorData};
use rayon::prelude::*;

/// Square max pooling with a stride.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxPool {
    /// Window height and width.
    pub kernel: usize,
    /// Stride in both directions.
    pub stride: usize,
}

impl MaxPool {
    /// Pools each channel.
    pub fn apply(self, x: Tensor<4>) -> Tensor<4> {
        let out = <burn::backend::Dispatch as PoolBackend>::dp_max_pool2d(x.into_dispatch(), self.kernel, self.stride);
        Tensor::from_dispatch(out)
    }
}

/// Max pooling as a backend extension: the forward with indices specialised per backend.
#[allow(deprecated)] // NdArray: the oracle tests' reference backend (the `ndarray` feature).
#[backend_extension(Flex, NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"), Autodiff)]
pub trait PoolBackend: Backend {
    /// Max pooling of x [B, C, H, W] with a square `kernel` and `stride`, no padding.
    fn dp_max_pool2d(x: FloatTensor<Self>, kernel: usize, stride: usize) -> FloatTensor<Self> {
        burns_pool::<Self>(x, kernel, stride)
    }
}

/// The forward pass with the indices a backward pass needs, per backend.
pub trait PoolWithIndices: Backend {
    /// Output and indices as `max_pool2d_with_indices` gives them.
    fn pool_with_indices(
        x: FloatTensor<Self>,
        kernel: usize,
        stride: usize,
        int: IntDType,
    ) -> MaxPool2dWithIndices<Self> {
        burns_pool_with_indices::<Self>(x, kernel, stride, int)
    }
}

/// Burn's max pooling with this module's geometry (square window, no padding or dilation).
fn burns_pool<B: Backend>(x: FloatTensor<B>, kernel: usize, stride: usize) -> FloatTensor<B> {
    B::max_pool2d(x, [kernel; 2], [stride; 2], [0, 0], [1, 1], false)
}

/// Burn's max pooling with indices, the same geometry.
fn burns_pool_with_indices<B: Backend>(
    x: FloatTensor<B>,
    kernel: usize,
    stride: usize,
    int: IntDType,
) -> MaxPool2dWithIndices<B> {
    B::max_pool2d_with_indices(x, [kernel; 2], [stride; 2], [0, 0], [1, 1], false, int)
}

#[cfg(feature = "ndarray")]
impl PoolBackend for burn::backend::NdArray {}
#[cfg(feature = "ndarray")]
impl PoolWithIndices for burn::backend::NdArray {}
#[cfg(feature = "wgpu")]
impl PoolBackend for burn_cubecl::Cube {}
#[cfg(feature = "wgpu")]
impl PoolWithIndices for burn_cubecl::Cube {}

/// One plane `input` [h, w] pooled into `vals` and `idx` [ho, wo]. `NAN`: the plane holds a NaN,
/// which wins, as in Burn's and PyTorch's pooling (testing for it costs, so a plane without
/// one, every plane of a healthy run, does not).
fn pool_plane<const NAN: bool>(
    input: &[f32],
    w: usize,
    [ho, wo]: [usize; 2],
    kernel: usize,
    stride: usize,
    vals: &mut [f32],
    idx: &mut [i64],
) {
    for oy in 0..ho {
        for ox in 0..wo {
            let mut best = oy * stride * w + ox * stride;
            let mut value = input[best];
            for ky in 0..kernel {
                for kx in 0..kernel {
                    let at = (oy * stride + ky) * w + ox * stride + kx;
                    // Selects, not branches: on real data the comparison is a coin toss, and
                    // mispredicted branches made this loop six times slower. The first maximum
                    // is kept.
                    let v = input[at];
                    let take = v > value || (NAN && v.is_nan());
                    best = if take { at } else { best };
                    value = if take { v } else { value };
                }
            }
            vals[oy * wo + ox] = value;
            idx[oy * wo + ox] = best as i64;
        }
    }
}

/// The pooled values and, per output, the flat index within its plane of the input it took.
fn host_pool(x: &[f32], [b, c, h, w]: [usize; 4], kernel: usize, stride: usize) -> (Vec<f32>, Vec<i64>) {
    let out = [(h - kernel) / stride + 1, (w - kernel) / stride + 1];
    let plane = out[0] * out[1];
    let mut values: Vec<f32> = zeros(b * c * plane);
    let mut indices: Vec<i64> = zeros(b * c * plane);
    values.par_chunks_mut(plane).zip(indices.par_chunks_mut(plane)).enumerate().for_each(|(p, (vals, idx))| {
        let input = &x[p * h * w..][..h * w];
        // A fold, not `any`: it reads the whole plane either way, and vectorises.
        match input.iter().fold(false, |nan, v| nan | v.is_nan()) {
            true => pool_plane::<true>(input, w, out, kernel, stride, vals, idx),
            false => pool_plane::<false>(input, w, out, kernel, stride, vals, idx),
        }
    });
    (values, indices)
}

/// Flex's pooling through the specialised pass (f32, windows inside the input); other cases
/// take Burn's.
fn flex_pool(x: FloatTensor<Flex>, kernel: usize, stride: usize) -> Option<(FloatTensor<Flex>, IntTensor<Flex>)> {
    let dims = dims::<4>(&x)?;
    if kernel == 0 || stride == 0 || dims[2] < kernel || dims[3] < kernel {
        return None;
    }
    let x = contiguous_f32(&x)?;
    let (values, indices) = host_pool(x.storage::<f32>(), dims, kernel, stride);
    let out = [dims[0], dims[1], (dims[2] - kernel) / stride + 1, (dims[3] - kernel) / stride + 1];
    let values = burn::backend::flex::FlexTensor::from_data(TensorData::new(values, out));
    let indices = burn::backend::flex::FlexTensor::from_data(TensorData::new(indices, out));
    Some((values, indices))
}

impl PoolBackend for Flex {
    fn dp_max_pool2d(x: FloatTensor<Self>, kernel: usize, stride: usize) -> FloatTensor<Self> {
        match flex_pool(x.clone(), kernel, stride) {
            Some((values, _)) => values,
            None => burns_pool::<Self>(x, kernel, stride),
        }
    }
}

impl PoolWithIndices for Flex {
    fn pool_with_indices(
        x: FloatTensor<Self>,
        kernel: usize,
        stride: usize,
        int: IntDType,
    ) -> MaxPool2dWithIndices<Self> {
        // i64 indices whatever the device's integer type: flex's backward reads any width.
        match flex_pool(x.clone(), kernel, stride) {
            Some((output, indices)) => MaxPool2dWithIndices::new(output, indices),
            None => burns_pool_with_indices::<Self>(x, kernel, stride, int),
        }
    }
}

/// The autodiff step of the pooling: its backward is Burn's max-pool backward.
#[derive(Debug)]
struct DpMaxPool;

impl<B: Backend> Backward<B, 1> for DpMaxPool {
    type State = (NodeId, IntTensor<B>, usize, usize);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, checkpointer: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (x_state, indices, kernel, stride) = ops.state;
        let x = checkpointer.retrieve_node_output(x_state);
        if let Some(node) = parent {
            let back =
                B::max_pool2d_with_indices_backward(x, [kernel; 2], [stride; 2], [0, 0], [1, 1], false, grad, indices);
            grads.register::<B>(node.id, back.x_grad);
        }
    }
}

impl<B: Backend + PoolBackend + PoolWithIndices, C: CheckpointStrategy> PoolBackend for Autodiff<B, C> {
    fn dp_max_pool2d(x: FloatTensor<Self>, kernel: usize, stride: usize) -> FloatTensor<Self> {
        match DpMaxPool.prepare::<C>([x.node()]).compute_bound().stateful() {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let int = get_or_init_device_settings::<B>(&x.primitive().device()).int_dtype;
                let out = B::pool_with_indices(x.into_primitive(), kernel, stride, int);
                prep.finish((x_state, out.indices, kernel, stride), out.output)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::dp_max_pool2d(x.into_primitive(), kernel, stride)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_io::to_host;
    use burn::tensor::Device;
    use burn::tensor::module::max_pool2d;
    use burn::tensor::ops::MaxPoolOptions;

    /// Values and input gradients of `pool` on `x` (on `device`), the loss weighting output i by
    /// i mod 7 + 1.
    fn pooled(
        pool: &dyn Fn(Tensor<4>) -> Tensor<4>,
        x: &[f32],
        shape: [usize; 4],
        device: &Device,
    ) -> (Vec<f32>, Vec<f32>) {
        let device = device.clone().autodiff();
        let x = Tensor::<4>::from_data(TensorData::new(x.to_vec(), shape), &device).require_grad();
        let y = pool(x.clone());
        let n = y.shape().num_elements();
        let weights = (0..n).map(|i| (i % 7 + 1) as f32).collect::<Vec<_>>();
        let weights = Tensor::<4>::from_data(TensorData::new(weights, y.dims()), &device);
        let grads = (y.clone() * weights).sum().backward();
        (to_host(&y.inner()), to_host(&x.grad(&grads).expect("a gradient")))
    }

    #[test]
    fn the_flex_pass_equals_burns_pooling_forward_and_backward() {
        // Values on a coarse grid, so that windows hold ties (the first maximum is taken).
        let shape = [3, 2, 9, 8];
        let mut x: Vec<f32> = (0..shape.iter().product::<usize>()).map(|i| (i * 7 % 13 / 4) as f32).collect();
        let reference = Device::ndarray();
        for (kernel, stride) in [(2, 1), (2, 2), (3, 2), (3, 3)] {
            let ours = |t: Tensor<4>| MaxPool { kernel, stride }.apply(t);
            let burns = |t: Tensor<4>| max_pool2d(t, MaxPoolOptions::new([kernel; 2]).with_stride([stride; 2]));
            let want = pooled(&burns, &x, shape, &reference);
            for device in [Device::flex(), reference.clone()] {
                assert_eq!(pooled(&ours, &x, shape, &device), want, "kernel {kernel} stride {stride} on {device:?}");
            }
        }
        // A NaN wins its windows, as in flex's own pooling (ndarray's skips it).
        x[80] = f32::NAN;
        let pool = MaxPool { kernel: 2, stride: 1 };
        let burns = |t: Tensor<4>| max_pool2d(t, MaxPoolOptions::new([2; 2]).with_stride([1; 2]));
        let (ours, want) =
            (pooled(&|t| pool.apply(t), &x, shape, &Device::flex()), pooled(&burns, &x, shape, &Device::flex()));
        let nan = |v: &[f32]| v.iter().map(|x| x.is_nan()).collect::<Vec<_>>();
        assert_eq!(nan(&ours.0), nan(&want.0));
        assert!(ours.0.iter().any(|v| v.is_nan()));
    }
}
