//! Moving parameters between the device and host vectors (checkpoints, noise, initialisation).

use burn::tensor::{Device, Tensor, TensorData};

/// A [rows, cols] tensor on `device` from row-major `values`.
pub fn matrix(values: Vec<f32>, shape: [usize; 2], device: &Device) -> Tensor<2> {
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// The values of a tensor, row-major, on the host.
pub fn to_host<const D: usize>(t: &Tensor<D>) -> Vec<f32> {
    t.to_data().try_into_vec_as::<f32>().expect("a float tensor converts to f32")
}

/// A matrix on the host: its shape and row-major values (how checkpoints store tensors).
pub type HostMatrix = ([usize; 2], Vec<f32>);

/// Host copies of `tensors`.
pub fn matrices_to_host(tensors: &[Tensor<2>]) -> Vec<HostMatrix> {
    tensors.iter().map(|t| (t.dims(), to_host(t))).collect()
}

/// Tensors on `device` from host copies read from a file: None when some values do not fit their
/// shape.
pub fn matrices_from_host(matrices: Vec<HostMatrix>, device: &Device) -> Option<Vec<Tensor<2>>> {
    matrices
        .into_iter()
        .map(|(shape, values)| (values.len() == shape[0] * shape[1]).then(|| matrix(values, shape, device)))
        .collect()
}
