//! Host access to flex tensors for the engine's own CPU passes (pooling, normalisation, tanh,
//! the convolution's weight gradient, per-example products): their shape as an array, their
//! f32 values as one slice that covers exactly the tensor, and an element-wise pass in place.

use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{BackendTensor, DispatchTensorKind, Flex};
use burn::tensor::{DType, Tensor, TensorData};
use rayon::prelude::*;
use std::mem::MaybeUninit;

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

/// Values per parallel task of [`map_chunks`].
const CHUNK: usize = 1 << 14;

/// x (f32) after `f` has run over its values in parallel chunks, each given with its offset: in x's own buffer where x alone holds it and it is exactly x's values (as flex's own
/// element-wise operations do), else in a copy made chunk by chunk. A fresh `vec![0.0; n]`
/// would be zeroed on one thread first (glibc's calloc of reused heap memory is a memset):
/// 16 MB of WRN-16-4's activations each time. x itself back (Err) for another dtype.
pub(crate) fn map_chunks(x: FlexTensor, f: impl Fn(usize, &mut [f32]) + Sync) -> Result<FlexTensor, FlexTensor> {
    map_chunks_of(CHUNK, x, f)
}

/// [`map_chunks`] in chunks of `chunk` values.
fn map_chunks_of(
    chunk: usize,
    mut x: FlexTensor,
    f: impl Fn(usize, &mut [f32]) + Sync,
) -> Result<FlexTensor, FlexTensor> {
    if x.dtype() != DType::F32 {
        return Err(x);
    }
    let n = x.layout().num_elements();
    let exact = x.layout().contiguous_offsets() == Some((0, n)) && x.bytes().len() == n * size_of::<f32>();
    if let Some(values) = x.try_storage_mut::<f32>().filter(|_| exact) {
        values.par_chunks_mut(chunk).enumerate().for_each(|(i, values)| f(i * chunk, values));
        return Ok(x);
    }
    let x = x.to_contiguous();
    let Some(source) = x.as_slice::<f32>() else { return Err(x) };
    let mut out: Vec<f32> = Vec::with_capacity(n);
    out.spare_capacity_mut().par_chunks_mut(chunk).zip(source.par_chunks(chunk)).enumerate().for_each(
        |(i, (out, source))| {
            for (o, &v) in out.iter_mut().zip(source) {
                o.write(v);
            }
            // SAFETY: every element of `out` was written just above, and MaybeUninit<f32> has
            // f32's layout.
            let out = unsafe { &mut *(out as *mut [MaybeUninit<f32>] as *mut [f32]) };
            f(i * chunk, out);
        },
    );
    // SAFETY: the chunks cover the n elements of the capacity (`source` has n values), and each
    // was written above.
    unsafe { out.set_len(n) };
    Ok(FlexTensor::from_data(TensorData::new(out, x.layout().shape().clone())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A [rows, cols] f32 flex tensor of 0, 1, 2, ...
    fn counting(rows: usize, cols: usize) -> FlexTensor {
        FlexTensor::from_data(TensorData::new((0..rows * cols).map(|i| i as f32).collect::<Vec<_>>(), [rows, cols]))
    }

    /// Each value becomes 1000 * value + its offset, which shows a chunk given the wrong offset.
    fn mark(offset: usize, values: &mut [f32]) {
        for (i, v) in values.iter_mut().enumerate() {
            *v = 1000.0 * *v + (offset + i) as f32;
        }
    }

    #[test]
    fn a_pass_runs_in_place_only_on_values_the_tensor_alone_holds() {
        let (rows, cols, chunk) = (7, 5, 4);
        let want: Vec<f32> = (0..rows * cols).map(|i| 1001.0 * i as f32).collect();
        // Alone: the same buffer comes back.
        let x = counting(rows, cols);
        let buffer = x.bytes().as_ptr();
        let y = map_chunks_of(chunk, x, mark).expect("f32");
        assert_eq!(y.bytes().as_ptr(), buffer);
        assert_eq!(y.storage::<f32>(), &want[..]);
        // Shared: the other holder keeps its values.
        let x = counting(rows, cols);
        let kept = x.clone();
        let y = map_chunks_of(chunk, x, mark).expect("f32");
        assert_eq!(y.storage::<f32>(), &want[..]);
        assert_eq!(kept.storage::<f32>(), counting(rows, cols).storage::<f32>());
        // A transposed view: its values in its own order.
        let t = counting(cols, rows).transpose(0, 1);
        let want: Vec<f32> =
            (0..rows * cols).map(|i| 1000.0 * ((i % cols) * rows + i / cols) as f32 + i as f32).collect();
        assert_eq!(map_chunks_of(chunk, t, mark).expect("f32").storage::<f32>(), &want[..]);
        // Another dtype comes back untouched.
        let ints = FlexTensor::from_data(TensorData::new(vec![1i64, 2, 3], [3]));
        assert!(map_chunks_of(chunk, ints, mark).is_err());
    }
}
