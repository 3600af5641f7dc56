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

/// Like [`matrix`], for values read from a file: None when their count does not fit the shape.
pub fn checked_matrix(values: Vec<f32>, shape: [usize; 2], device: &Device) -> Option<Tensor<2>> {
    (values.len() == shape[0] * shape[1]).then(|| matrix(values, shape, device))
}
