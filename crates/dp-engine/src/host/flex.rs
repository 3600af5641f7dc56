//! Host access to flex tensors for the engine's own CPU passes (pooling, normalisation, tanh,
//! the convolution's weight gradient, per-example products): their shape as an array, and their
//! f32 values as one slice that covers exactly the tensor.

use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{BackendTensor, DispatchTensorKind, Flex};
use burn::tensor::{DType, Tensor};

/// x with its f32 values contiguous (`storage()` is then exactly its elements, in order); None
/// for another dtype, which the caller hands to Burn's own operation.
pub(crate) fn contiguous_f32(x: &FloatTensor<Flex>) -> Option<FlexTensor> {
    (x.dtype() == DType::F32).then(|| x.clone().to_contiguous())
}

/// The dimensions of a rank-`D` tensor; None for another rank, which the caller hands to Burn's
/// own operation.
pub(crate) fn dims<const D: usize>(x: &FlexTensor) -> Option<[usize; D]> {
    let shape = x.layout().shape();
    (shape.num_dims() == D).then(|| std::array::from_fn(|i| shape[i]))
}

/// Whether `t` lives on flex (without copying it).
pub(crate) fn is_flex<const D: usize>(t: &Tensor<D>) -> bool {
    matches!(t.clone().into_dispatch().kind, DispatchTensorKind::Flex(_))
}

/// The contiguous f32 flex primitive of a tensor that autodiff does not track; None on another
/// backend or dtype, where the caller keeps its tensor operations.
pub(crate) fn on_flex<const D: usize>(t: &Tensor<D>) -> Option<FlexTensor> {
    match t.clone().into_dispatch().kind {
        DispatchTensorKind::Flex(BackendTensor::Float(x)) => contiguous_f32(&x),
        _ => None,
    }
}
