//! The im2col kernel against a naive reference that reads each patch element by its definition
//! (zero padding, stride, dilation), on the CPU backends (flex, ndarray) and on the device kernel
//! (lavapipe in CI), for geometries of the zoo's convolutions and odd ones.

use burn::tensor::{Device, Tensor, TensorData};
use dp_kernels::wgpu_probe::wgpu_for_tests;
use dp_kernels::{Patches, im2col};

/// x[b, c, y, x] of a reproducible input of `shape`.
fn input(shape: [usize; 4]) -> Vec<f32> {
    (0..shape.iter().product::<usize>()).map(|i| ((i * 7919 + 13) % 101) as f32 / 50.0 - 1.0).collect()
}

/// The patches by definition: element (b, (c, ki, kj), (oy, ox)) is the padded input at
/// (oy s + ki d, ox s + kj d).
fn naive(x: &[f32], [b, c, h, w]: [usize; 4], p: &Patches) -> Vec<f32> {
    let [ho, wo] = p.output_size([h, w]);
    let [kh, kw] = p.kernel;
    let mut out = Vec::new();
    for bi in 0..b {
        for ci in 0..c {
            for ki in 0..kh {
                for kj in 0..kw {
                    for oy in 0..ho {
                        for ox in 0..wo {
                            let y = (oy * p.stride[0] + ki * p.dilation[0]) as isize - p.padding[0] as isize;
                            let xx = (ox * p.stride[1] + kj * p.dilation[1]) as isize - p.padding[1] as isize;
                            let inside = (0..h as isize).contains(&y) && (0..w as isize).contains(&xx);
                            out.push(if inside { x[((bi * c + ci) * h + y as usize) * w + xx as usize] } else { 0.0 });
                        }
                    }
                }
            }
        }
    }
    out
}

fn check(device: &Device, name: &str) {
    let cases = [
        ([3, 1, 28, 28], Patches { kernel: [8, 8], stride: [2, 2], padding: [3, 3], dilation: [1, 1] }),
        ([2, 16, 13, 13], Patches { kernel: [4, 4], stride: [2, 2], padding: [0, 0], dilation: [1, 1] }),
        ([2, 3, 9, 7], Patches { kernel: [3, 3], stride: [1, 1], padding: [1, 1], dilation: [1, 1] }),
        ([1, 2, 11, 9], Patches { kernel: [3, 2], stride: [2, 3], padding: [2, 1], dilation: [2, 3] }),
        ([2, 4, 5, 5], Patches { kernel: [1, 1], stride: [2, 2], padding: [0, 0], dilation: [1, 1] }),
        ([1, 1, 784, 1], Patches { kernel: [3, 3], stride: [2, 2], padding: [1, 1], dilation: [1, 1] }),
    ];
    for (shape, p) in cases {
        let x = input(shape);
        let t = Tensor::<4>::from_data(TensorData::new(x.clone(), shape), device);
        let got = im2col(t, &p).expect("im2col");
        let [b, c, h, w] = shape;
        let [ho, wo] = p.output_size([h, w]);
        assert_eq!(got.dims(), [b, c * p.kernel[0] * p.kernel[1], ho * wo], "{name} {shape:?}");
        let got = got.to_data().try_into_vec_as::<f32>().expect("f32");
        assert_eq!(got, naive(&x, shape, &p), "{name} {shape:?} {p:?}");
    }
}

#[test]
fn im2col_matches_the_definition_on_every_backend() {
    check(&Device::flex(), "flex");
    #[allow(deprecated)]
    check(&Device::ndarray(), "ndarray");
    if let Some(device) = wgpu_for_tests() {
        check(&device, "wgpu");
    }
}
