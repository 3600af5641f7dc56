//! Host access to flex tensors for the engine's own CPU passes (pooling, normalisation, tanh):
//! their f32 values as one slice that covers exactly the tensor.

use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::tensor::DType;

/// x with its f32 values contiguous (`storage()` is then exactly its elements, in order); None
/// for another dtype, which the caller hands to Burn's own operation.
pub(crate) fn contiguous_f32(x: &FloatTensor<Flex>) -> Option<FlexTensor> {
    (x.dtype() == DType::F32).then(|| x.clone().to_contiguous())
}
