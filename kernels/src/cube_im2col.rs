//! The im2col kernel for CubeCL devices: one unit per element of the patches [B, C*kh*kw, P],
//! reading its input element or writing zero in the padding (the CPU version is `im2col`).

use crate::cube_output::contiguous_output;
use crate::im2col::Patches;
use burn::backend::DType;
use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::cubecl::{CubeDim, calculate_cube_count_elemwise};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;

/// The sizes a launch needs.
#[derive(CubeLaunch, CubeType)]
pub struct Geometry {
    channels: u32,
    height: u32,
    width: u32,
    kernel_h: u32,
    kernel_w: u32,
    out_w: u32,
    positions: u32,
    stride_h: u32,
    stride_w: u32,
    pad_h: u32,
    pad_w: u32,
    dilation_h: u32,
    dilation_w: u32,
}

#[cube(launch)]
fn im2col_kernel(x: &Tensor<f32>, out: &mut Tensor<f32>, g: Geometry) {
    let i = ABSOLUTE_POS;
    if i >= out.len() {
        terminate!();
    }
    let kk = g.kernel_h * g.kernel_w;
    let rows = g.channels * kk;
    let pos = i as u32 % g.positions;
    let row = (i as u32 / g.positions) % rows;
    let example = i as u32 / (g.positions * rows);
    let channel = row / kk;
    let ki = (row / g.kernel_w) % g.kernel_h;
    let kj = row % g.kernel_w;
    let oy = pos / g.out_w;
    let ox = pos % g.out_w;
    // Padded coordinates: the input element is at (y - pad, x - pad) when inside the image.
    let y = oy * g.stride_h + ki * g.dilation_h;
    let xx = ox * g.stride_w + kj * g.dilation_w;
    let inside = y >= g.pad_h && y < g.height + g.pad_h && xx >= g.pad_w && xx < g.width + g.pad_w;
    let mut value = 0.0f32;
    if inside {
        let src = ((example * g.channels + channel) * g.height + (y - g.pad_h)) * g.width + (xx - g.pad_w);
        value = x[src as usize];
    }
    out[i] = value;
}

/// The patches of `x` [B, C, H, W] on its device.
pub fn im2col(x: CubeTensor, p: &Patches) -> CubeTensor {
    let x = into_contiguous(x);
    let dims = x.meta.shape().clone();
    let (b, c, h, w) = (dims[0], dims[1], dims[2], dims[3]);
    let [ho, wo] = p.output_size([h, w]);
    let [kh, kw] = p.kernel;
    let shape = [b, c * kh * kw, ho * wo];
    let out = contiguous_output(&x, shape, DType::F32);
    let n = b * c * kh * kw * ho * wo;
    let dim = CubeDim::new_1d(256);
    let count = calculate_cube_count_elemwise(&x.client, n, dim);
    let u = |v: usize| v as u32;
    let geometry = GeometryLaunch::new(
        u(c),
        u(h),
        u(w),
        u(kh),
        u(kw),
        u(wo),
        u(ho * wo),
        u(p.stride[0]),
        u(p.stride[1]),
        u(p.padding[0]),
        u(p.padding[1]),
        u(p.dilation[0]),
        u(p.dilation[1]),
    );
    im2col_kernel::launch(&out.client, count, dim, x.into_tensor_arg(), out.clone().into_tensor_arg(), geometry);
    out
}
