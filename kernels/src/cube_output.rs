//! The output buffer of the engine's CubeCL kernels. They write their outputs by linear index, so
//! an output must be laid out row after row with no gap: a runtime's `Optimized` layout (CUDA's
//! pitched rows, each padded to an alignment) would put a kernel's writes in the wrong places and
//! leave the padding's old contents in the tensor. wgpu allocates contiguously either way, so
//! only CUDA showed it (an H100's self-test, docs/KERNELS.md).

use burn::backend::DType;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;

/// An uninitialised contiguous tensor of `shape` and `dtype` on `like`'s device.
pub(crate) fn contiguous_output(like: &CubeTensor, shape: impl Into<burn::tensor::Shape>, dtype: DType) -> CubeTensor {
    empty_device_contiguous_dtype(like.client.clone(), like.device.clone(), shape.into(), dtype)
}
