//! The noise kernels for CubeCL devices (wgpu): one unit per ChaCha20 block computes the block in
//! registers, turns it into eight normals and writes `(g + sigma * z) * scale` for its eight
//! elements: the noise never touches memory, and the gradient is read and written once.

use crate::chacha::{CONSTANTS, StreamPosition};
use crate::cube_output::contiguous_output;
use burn::backend::DType;
use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::cubecl::{CubeDim, calculate_cube_count_elemwise};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;

/// Units per cube.
const CUBE_SIZE: u32 = 256;

/// The key, stream and first block of a launch.
#[derive(CubeLaunch, CubeType)]
pub struct ChaChaKey {
    k0: u32,
    k1: u32,
    k2: u32,
    k3: u32,
    k4: u32,
    k5: u32,
    k6: u32,
    k7: u32,
    stream_lo: u32,
    stream_hi: u32,
    block_lo: u32,
    block_hi: u32,
}

impl ChaChaKey {
    /// The launch argument for `position`.
    fn launch(position: &StreamPosition) -> ChaChaKeyLaunch {
        let k = position.key;
        ChaChaKeyLaunch::new(
            k[0],
            k[1],
            k[2],
            k[3],
            k[4],
            k[5],
            k[6],
            k[7],
            position.stream as u32,
            (position.stream >> 32) as u32,
            position.block as u32,
            (position.block >> 32) as u32,
        )
    }
}

/// Rotate left (CubeCL has no `rotate_left` on the device).
#[allow(clippy::manual_rotate)]
#[cube]
fn rotl(v: u32, n: u32) -> u32 {
    (v << n) | (v >> (32u32 - n))
}

#[cube]
fn quarter_round(
    x: &mut Array<u32>,
    #[comptime] a: usize,
    #[comptime] b: usize,
    #[comptime] c: usize,
    #[comptime] d: usize,
) {
    x[a] += x[b];
    x[d] = rotl(x[d] ^ x[a], 16u32);
    x[c] += x[d];
    x[b] = rotl(x[b] ^ x[c], 12u32);
    x[a] += x[b];
    x[d] = rotl(x[d] ^ x[a], 8u32);
    x[c] += x[d];
    x[b] = rotl(x[b] ^ x[c], 7u32);
}

/// Block `key.block + offset` of the key's stream, into `out` (sixteen words).
#[cube]
fn chacha_block(key: &ChaChaKey, offset: u32, out: &mut Array<u32>) {
    let lo = key.block_lo + offset;
    let carry = select(lo < key.block_lo, 1u32, 0u32);
    let mut init = Array::<u32>::new(16usize);
    init[0] = comptime!(CONSTANTS[0]);
    init[1] = comptime!(CONSTANTS[1]);
    init[2] = comptime!(CONSTANTS[2]);
    init[3] = comptime!(CONSTANTS[3]);
    init[4] = key.k0;
    init[5] = key.k1;
    init[6] = key.k2;
    init[7] = key.k3;
    init[8] = key.k4;
    init[9] = key.k5;
    init[10] = key.k6;
    init[11] = key.k7;
    init[12] = lo;
    init[13] = key.block_hi + carry;
    init[14] = key.stream_lo;
    init[15] = key.stream_hi;
    #[unroll]
    for i in 0..16usize {
        out[i] = init[i];
    }
    for _ in 0..10u32 {
        quarter_round(out, 0usize, 4usize, 8usize, 12usize);
        quarter_round(out, 1usize, 5usize, 9usize, 13usize);
        quarter_round(out, 2usize, 6usize, 10usize, 14usize);
        quarter_round(out, 3usize, 7usize, 11usize, 15usize);
        quarter_round(out, 0usize, 5usize, 10usize, 15usize);
        quarter_round(out, 1usize, 6usize, 11usize, 12usize);
        quarter_round(out, 2usize, 7usize, 8usize, 13usize);
        quarter_round(out, 3usize, 4usize, 9usize, 14usize);
    }
    #[unroll]
    for i in 0..16usize {
        out[i] += init[i];
    }
}

/// ln(u) for a normal u in (0, 1], exactly as `gaussian::ln_unit`.
#[cube]
fn ln_unit(u: f32) -> f32 {
    let bits = u.to_bits();
    let mantissa = f32::from_bits((bits & 0x007f_ffffu32) | 0x3f80_0000u32);
    let sqrt_2: f32 = comptime!(std::f32::consts::SQRT_2);
    let above = mantissa > sqrt_2;
    let m = select(above, mantissa * 0.5f32, mantissa);
    let e = f32::cast_from(i32::cast_from(bits >> 23u32) - 127i32 + select(above, 1i32, 0i32));
    let x = m - 1.0f32;
    let t = x / (2.0f32 + x);
    let t2 = t * t;
    let series = 1.0f32
        + t2 * (1.0f32 / 3.0f32
            + t2 * (1.0f32 / 5.0f32
                + t2 * (1.0f32 / 7.0f32 + t2 * (1.0f32 / 9.0f32 + t2 * (1.0f32 / 11.0f32 + t2 / 13.0f32)))));
    e * 0.693_145_75f32 + (e * 1.428_606_8e-6f32 + 2.0f32 * t * series)
}

/// (cos 2 pi u, sin 2 pi u) for u = (k + 1/2) 2^-24, exactly as `gaussian::turn`.
#[cube]
fn turn(k: u32) -> (f32, f32) {
    let q = (k + (1u32 << 21u32)) >> 22u32;
    let r = (f32::cast_from(i32::cast_from(k) - i32::cast_from(q << 22u32)) + 0.5f32) * (1.0f32 / 16777216.0f32);
    let x = r * 6.283_185_5f32;
    let z = x * x;
    let sin = x + x * z * (-1.666_665_5e-1f32 + z * (8.332_161e-3f32 + z * -1.951_529_6e-4f32));
    let cos = z * z * (4.166_664_6e-2f32 + z * (-1.388_731_6e-3f32 + z * 2.443_315_7e-5f32)) - 0.5f32 * z + 1.0f32;
    let odd = (q & 1u32) == 1u32;
    let c = select(odd, sin, cos);
    let s = select(odd, cos, sin);
    let c = f32::from_bits(c.to_bits() ^ (((q + 1u32) & 2u32) << 30u32));
    let s = f32::from_bits(s.to_bits() ^ ((q & 2u32) << 30u32));
    (c, s)
}

/// Box-Muller on words (w0, w1, w2), exactly as `gaussian::box_muller`.
#[cube]
fn box_muller(w0: u32, w1: u32, w2: u32) -> (f32, f32) {
    let two_pow_m24 = 1.0f32 / 16777216.0f32;
    let hi = f32::cast_from(w0 >> 8u32);
    let lo = f32::cast_from(w1 >> 8u32);
    let u1 = (hi + (lo + 0.5f32) * two_pow_m24) * two_pow_m24;
    let radius = (ln_unit(u1) * -2.0f32).sqrt();
    let (cos, sin) = turn(w2 >> 8u32);
    (radius * cos, radius * sin)
}

/// out[i] = (grad[i] + sigma[i or 0] * z_i) * scale for the eight elements of this unit's block.
#[cube(launch)]
fn noisy_scale_kernel(grad: &Tensor<f32>, sigma: &Tensor<f32>, out: &mut Tensor<f32>, key: ChaChaKey, scale: f32) {
    let unit = ABSOLUTE_POS;
    let first = unit * 8usize;
    if first >= out.len() {
        terminate!();
    }
    let mut words = Array::<u32>::new(16usize);
    chacha_block(&key, unit as u32, &mut words);
    let per_element = sigma.len() > 1usize;
    #[unroll]
    for p in 0..4usize {
        let (c, s) = box_muller(words[4 * p], words[4 * p + 1], words[4 * p + 2]);
        let i = first + 2 * p;
        if i < out.len() {
            let sd = sigma[select(per_element, i, 0usize)];
            out[i] = (grad[i] + sd * c) * scale;
        }
        if i + 1 < out.len() {
            let sd = sigma[select(per_element, i + 1, 0usize)];
            out[i + 1] = (grad[i + 1] + sd * s) * scale;
        }
    }
}

/// The raw words of consecutive blocks (for the cross-backend bit-identity test).
#[cube(launch)]
fn words_kernel(out: &mut Tensor<u32>, key: ChaChaKey) {
    let unit = ABSOLUTE_POS;
    let first = unit * 16usize;
    if first >= out.len() {
        terminate!();
    }
    let mut words = Array::<u32>::new(16usize);
    chacha_block(&key, unit as u32, &mut words);
    #[unroll]
    for j in 0..16usize {
        if first + j < out.len() {
            out[first + j] = words[j];
        }
    }
}

/// Launch geometry for `units` units.
fn geometry(tensor: &CubeTensor, units: usize) -> (CubeCount, CubeDim) {
    let dim = CubeDim::new_1d(CUBE_SIZE);
    (calculate_cube_count_elemwise(&tensor.client, units, dim), dim)
}

/// `(grad + sigma * z) * scale` on the device, z the normals of `position`.
pub fn noisy_scale(grad: CubeTensor, sigma: CubeTensor, position: &StreamPosition, scale: f32) -> CubeTensor {
    let grad = into_contiguous(grad);
    let sigma = into_contiguous(sigma);
    let shape = grad.meta.shape().clone();
    let out = contiguous_output(&grad, shape.clone(), DType::F32);
    let (count, dim) = geometry(&grad, shape.num_elements().div_ceil(8));
    noisy_scale_kernel::launch(
        &out.client,
        count,
        dim,
        grad.into_tensor_arg(),
        sigma.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        ChaChaKey::launch(position),
        scale,
    );
    out
}

/// The first `n` words of `position` as a u32 tensor on `like`'s device.
pub fn words(like: &CubeTensor, position: &StreamPosition, n: usize) -> CubeTensor {
    let out = contiguous_output(like, [n], DType::U32);
    let (count, dim) = geometry(like, n.div_ceil(16));
    words_kernel::launch(&out.client, count, dim, out.clone().into_tensor_arg(), ChaChaKey::launch(position));
    out
}
