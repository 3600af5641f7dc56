//! Moving tensors between the device and host vectors (noise scales, canaries, tests).

use burn::tensor::{Device, Tensor, TensorData};

/// A vector on `device`.
pub fn vector(values: Vec<f32>, device: &Device) -> Tensor<1> {
    let n = values.len();
    Tensor::from_data(TensorData::new(values, [n]), device)
}

/// A [rows, cols] tensor on `device` from row-major `values`.
pub fn matrix(values: Vec<f32>, shape: [usize; 2], device: &Device) -> Tensor<2> {
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// The values of a tensor, row-major, on the host.
pub fn to_host<const D: usize>(t: &Tensor<D>) -> Vec<f32> {
    t.to_data().try_into_vec_as::<f32>().expect("a float tensor converts to f32")
}
