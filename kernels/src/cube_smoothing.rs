//! The Laplacian smoothing kernel for CubeCL devices: one unit per output element accumulates the
//! circulant convolution with the closed-form taps (`smoothing::Taps`), one pass over the tensor.

use crate::cube_output::contiguous_output;
use crate::smoothing::Taps;
use burn::backend::DType;
use burn::backend::ops::FloatTensorOps;
use burn::tensor::TensorData;
use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::cubecl::{CubeDim, calculate_cube_count_elemwise};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;

/// out_j = sum_k c_k v_{j-k} (full) or c_0 v_j + sum_{k>=1} c_k (v_{j+k} + v_{j-k}), indices mod d.
#[cube(launch)]
fn circulant_kernel(v: &Tensor<f32>, taps: &Tensor<f32>, out: &mut Tensor<f32>, full: u32) {
    let j = ABSOLUTE_POS;
    let d = v.len();
    if j >= d {
        terminate!();
    }
    let m = taps.len();
    let mut acc = taps[0usize] * v[j];
    for k in 1..m {
        let left = select(j >= k, j - k, j + d - k);
        if full != 0u32 {
            acc += taps[k] * v[left];
        } else {
            let right = select(j + k >= d, j + k - d, j + k);
            acc += taps[k] * (v[right] + v[left]);
        }
    }
    out[j] = acc;
}

/// A_s^{-1} v on the device, v flattened.
pub fn circulant(v: CubeTensor, taps: &Taps) -> CubeTensor {
    let v = into_contiguous(v);
    let shape = v.meta.shape().clone();
    let n = shape.num_elements();
    let data = TensorData::new(taps.values.clone(), [taps.values.len()]);
    let taps_tensor = burn_cubecl::CubeBackend::float_from_data(data, &v.device);
    let out = contiguous_output(&v, shape, DType::F32);
    let dim = CubeDim::new_1d(256);
    let count = calculate_cube_count_elemwise(&v.client, n, dim);
    circulant_kernel::launch(
        &out.client,
        count,
        dim,
        v.into_tensor_arg(),
        taps_tensor.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        u32::from(taps.full),
    );
    out
}
