//! The device noise kernel against its CPU reference (ndarray) and against the normal law: the
//! random words bit-identical across backends for the same key, the normals equal to 1e-5 (the
//! device's own ln, sqrt, sin and cos), and a Kolmogorov-Smirnov test and tail frequencies over
//! 10^7 draws.

use burn::tensor::{Device, Tensor, TensorData};
use dp_kernels::wgpu_probe::wgpu_for_tests;
use dp_kernels::{NoiseScale, StreamPosition, gaussian, noisy_scale, random_words};

#[allow(deprecated)]
fn cpu() -> Device {
    Device::ndarray()
}

/// A key, stream and first block; the block sits just below 2^32 so that a draw crosses the
/// counter's 32-bit carry.
fn position() -> StreamPosition {
    StreamPosition {
        key: [0x0123_4567, 0x89ab_cdef, 7, 0xdead_beef, 42, 0, u32::MAX, 0x5555_aaaa],
        stream: 1,
        block: (1 << 32) - 3,
    }
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.to_data().try_into_vec_as::<f32>().expect("f32")
}

/// `n` standard normals drawn on `device` through the fused kernel (zero gradient, sigma 1).
fn normals_on(device: &Device, n: usize) -> Vec<f32> {
    values(noisy_scale(Tensor::<1>::zeros([n], device), &NoiseScale::Uniform(1.0), &position(), 1.0).expect("noise"))
}

#[test]
fn words_are_bit_identical_across_backends() {
    let n = 16 * 7 + 5;
    let host = random_words(&cpu(), &position(), n).expect("cpu words");
    assert_eq!(host, dp_kernels::chacha::words(&position(), n));
    if let Some(device) = wgpu_for_tests() {
        assert_eq!(random_words(&device, &position(), n).expect("wgpu words"), host);
    }
}

#[test]
fn normals_agree_across_backends_and_with_the_reference() {
    let n = 8 * 1000 + 3;
    let reference = gaussian::normals(&position(), n);
    assert_eq!(normals_on(&cpu(), n), reference);
    if let Some(device) = wgpu_for_tests() {
        let device_normals = normals_on(&device, n);
        let worst =
            device_normals.iter().zip(&reference).map(|(a, b)| (a - b).abs() / b.abs().max(1.0)).fold(0.0f32, f32::max);
        // The words are bit-identical (above); the transform need not be: it calls no ln, sin or
        // cos (its own polynomials, the same operations on both sides), but a device may divide
        // and take square roots within a few ulp and contract products into FMAs. Measured
        // worst: 2.2e-7 on lavapipe (3.6e-7 with the device's own ln, sin and cos, and 2.5e-6
        // then on an NVIDIA H100); a wrong stream or transform errs by O(1).
        assert!(worst <= 1e-5, "device normals differ from the reference by {worst:e}");
    }
}

#[test]
fn fused_step_adds_scaled_noise_with_scalar_or_per_coordinate_sigma() {
    let n = 37;
    let grad: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 3.0).collect();
    let sigmas: Vec<f32> = (0..n).map(|i| 0.1 + i as f32 * 0.05).collect();
    let z = gaussian::normals(&position(), n);
    let mut devices = vec![cpu()];
    devices.extend(wgpu_for_tests());
    for device in devices {
        for sigma in [vec![2.5f32], sigmas.clone()] {
            let g = Tensor::<2>::from_data(TensorData::new(grad.clone(), [1, n]), &device);
            let scale = match sigma.len() {
                1 => NoiseScale::Uniform(sigma[0]),
                _ => {
                    NoiseScale::PerCoordinate(Box::new(Tensor::from_data(TensorData::new(sigma.clone(), [n]), &device)))
                }
            };
            let out = values(noisy_scale(g, &scale, &position(), 0.5).expect("noise"));
            for i in 0..n {
                let s = sigma[if sigma.len() == 1 { 0 } else { i }];
                let expected = (grad[i] + s * z[i]) * 0.5;
                assert!((out[i] - expected).abs() <= 1e-5 * expected.abs().max(1.0), "{i}: {} vs {expected}", out[i]);
            }
        }
    }
    let two = NoiseScale::PerCoordinate(Box::new(Tensor::from_data(TensorData::new(vec![1.0f32, 2.0], [2]), &cpu())));
    let wrong = noisy_scale(Tensor::<1>::zeros([4], &cpu()), &two, &position(), 1.0);
    assert!(wrong.is_err(), "two sigmas for four coordinates must be refused");
}

/// Standard normal CDF.
fn phi(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// KS statistic, and counts beyond 4 sigma, of `draws`.
fn normality(mut draws: Vec<f32>) -> (f64, usize) {
    let beyond = draws.iter().filter(|z| z.abs() > 4.0).count();
    draws.sort_by(f32::total_cmp);
    let n = draws.len() as f64;
    let ks = draws
        .iter()
        .enumerate()
        .map(|(i, &z)| {
            let f = phi(f64::from(z));
            (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
        })
        .fold(0.0, f64::max);
    (ks, beyond)
}

#[test]
fn ten_million_draws_pass_ks_and_tail_tests() {
    let n = 10_000_000;
    let mut devices = vec![cpu()];
    devices.extend(wgpu_for_tests());
    for device in devices {
        let (ks, beyond) = normality(normals_on(&device, n));
        // KS critical value at level 0.001: 1.949 / sqrt(n) = 6.2e-4.
        assert!(ks < 1.949 / (n as f64).sqrt(), "KS statistic {ks:e} on {device:?}");
        // P(|Z| > 4) = 6.334e-5: 633.4 expected, binomial sd 25.2; allow 5 sd.
        assert!((beyond as f64 - 633.4).abs() < 5.0 * 25.2, "{beyond} draws beyond 4 sigma on {device:?}");
    }
}

#[test]
fn tails_reach_eight_sigma() {
    // The smallest radius uniform (all 48 bits zero) gives sqrt(2 ln 2^49) = 8.24.
    let (c, _) = gaussian::box_muller(0, 0, 0);
    assert!(c > 8.0, "largest normal {c}");
}
